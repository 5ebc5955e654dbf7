"""llm-swarm: a Locust-based load-testing swarm for OpenAI-compatible LLM servers.

Importing `swarm` is cheap and does not import Locust; `swarm.LLMUser` does (lazily), because
Locust monkey-patches the standard library with gevent on import.
"""

from __future__ import annotations

from typing import Any

from swarm.records import Outcome, RequestRecord

__all__ = ["LLMUser", "Outcome", "RequestRecord"]


def __getattr__(name: str) -> Any:
    if name == "LLMUser":
        from swarm.user import LLMUser

        return LLMUser
    raise AttributeError(f"module 'swarm' has no attribute {name!r}")
