"""Grafana: the dashboards as code, the HTTP API (datasource, dashboards, annotations), and the
`swarm dashboards` command. Imports only `swarm.core`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# swarm 0.1's flat `swarm/grafana.py` offered these; they live in swarm.grafana.api now.
_API_NAMES = frozenset(
    {
        "Annotator",
        "push",
        "datasource_model",
        "safe_url",
        "check_url",
        "describe",
        "api_client",
        "configure",
        "main",
    }
)


def __getattr__(name: str) -> Any:
    """`from swarm.grafana import Annotator` (the 0.1 path) keeps working for one release, with a
    DeprecationWarning; to be removed in 0.3 with swarm/_compat.py's aliases."""
    if name in _API_NAMES:
        warnings.warn(
            f"swarm.grafana.{name} is deprecated and will be removed in swarm 0.3: "
            f"import it from swarm.grafana.api",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("swarm.grafana.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
