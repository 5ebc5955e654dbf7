"""Old import paths (swarm 0.1's flat layout) keep working for one release, with a deprecation note.

`import swarm.user` (or `from swarm.plugin import ...`) finds the module at its new home and
hands back that very module object, so `swarm.user.LLMUser is swarm.live.user.LLMUser`; the
first import of an old path warns once (DeprecationWarning) with the path to use. One table,
no shim files: the folder tree stays the architecture. To be removed in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

# old module -> new module. Symbols that moved to another module are re-exported by the new one.
MOVED: dict[str, str] = {
    "swarm.records": "swarm.core.records",
    "swarm.events": "swarm.core.events",
    "swarm.errors": "swarm.core.errors",
    "swarm.tokens": "swarm.core.tokens",
    "swarm.sse": "swarm.client.sse",
    "swarm.dialects": "swarm.client.dialects",
    "swarm.user": "swarm.live.user",
    "swarm.metrics": "swarm.stats.quantiles",
    "swarm.aggregate": "swarm.stats.aggregate",
    "swarm.summary": "swarm.stats.summary",
    "swarm.slo": "swarm.stats.slo",
    "swarm.workloads": "swarm.load.workloads",
    "swarm.prompts": "swarm.load.prompts",
    "swarm.stages": "swarm.load.stages",
    "swarm.arrivals": "swarm.load.arrivals",
    "swarm.shape": "swarm.live.shape",
    "swarm.plugin": "swarm.live.plugin",
    "swarm.exporter": "swarm.live.exporter",
    "swarm.recorder": "swarm.live.recorder",
    "swarm.webui": "swarm.live.webui",
    "swarm.webauth": "swarm.live.webauth",
    "swarm.server_metrics": "swarm.analysis.server_metrics",
    "swarm.diagnosis": "swarm.analysis.diagnosis",
    "swarm.report": "swarm.analysis.report",
    "swarm.compare": "swarm.analysis.compare",
    "swarm.table": "swarm.analysis.table",
    "swarm.run": "swarm.orchestrate.run",
    "swarm.progress": "swarm.orchestrate.progress",
    "swarm.demo": "swarm.orchestrate.demo",
    "swarm.target": "swarm.orchestrate.targets",
    "swarm.dashboards": "swarm.grafana.dashboards",
    "swarm.dashboards_cli": "swarm.grafana.cli",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} is deprecated and will be removed in swarm 0.3: import {self.new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:  # the new module is already executed
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
