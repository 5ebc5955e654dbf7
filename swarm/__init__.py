"""llm-swarm: a Locust-based load-testing swarm for OpenAI-compatible LLM servers.

The public API, for locustfiles and scripts:

    from swarm import LLMUser, llm_request, RequestRecord, Outcome

- `LLMUser`: the Locust user that sends one streamed completion per task and measures it
  (subclass it and set `workload`);
- `llm_request`: the event hook fired once per finished request with `record=RequestRecord`;
- `RequestRecord`, `Outcome`: what one request measured, and how it ended;
- `SwarmError`, `UsageError`, `TargetError`: the exceptions the swarm raises on purpose.

Importing `swarm` is cheap and does not import Locust; `swarm.LLMUser` does (lazily), because
Locust monkey-patches the standard library with gevent on import. The subpackages, bottom up
(docs/ARCHITECTURE.md): core; client, stats, load, sim; live, analysis, grafana; orchestrate.
"""

from __future__ import annotations

from typing import Any

from swarm.core.errors import SwarmError, TargetError, UsageError
from swarm.core.records import Outcome, RequestRecord

__all__ = ["LLMUser", "Outcome", "RequestRecord", "SwarmError", "TargetError", "UsageError", "llm_request"]


def __getattr__(name: str) -> Any:
    if name == "LLMUser":
        from swarm.live.user import LLMUser

        return LLMUser
    if name == "llm_request":  # (swarm.core.events imports Locust's EventHook)
        from swarm.core.events import llm_request

        return llm_request
    raise AttributeError(f"module 'swarm' has no attribute {name!r}")
