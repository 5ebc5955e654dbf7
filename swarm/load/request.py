"""What one request asks for (`LLMRequest`), a prompt of a prompt set (`Prompt`), and the one
protocol every workload kind satisfies (`Workload`).

The bottom of load/: it imports nothing else of load/, so every workload module (workloads.py,
builtin.py, prompt_file.py, synthetic.py, dataset.py, sessions.py) builds its requests with it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from swarm.core.tokenizer import Tokenizer

Messages = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class LLMRequest:
    workload: str
    messages: Messages
    max_tokens: int
    thinking: bool | None = None  # None: send no thinking switch (server default)
    ignore_eos: bool = False  # force the output to max_tokens (synthetic, datasets), besides --ignore-eos
    request_class: str | None = None  # None: "thinking" when thinking is on, else "direct"
    prompt_tokens: int | None = None  # the prompt's length as the server counts it, when known
    tools: list[dict[str, Any]] | None = None  # agent steps: the functions offered (OpenAI `tools`)
    tool_choice: Any = None  # agent steps: auto | required | none | {"type": "function", ...}

    def prompt_text(self) -> str:
        """The prompt for /v1/completions: the message contents, blank-line separated."""
        return "\n\n".join(_content_text(m.get("content")) for m in self.messages)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt of a prompt set (shipped, or the custom workload's file)."""

    messages: Messages
    max_tokens: int | None = None  # None: the workload's
    thinking: bool | None = None  # None: the workload's ratio decides
    prompt_tokens: int | None = None  # the prompt's length as the server counts it, when known


@runtime_checkable
class Workload(Protocol):
    """What every workload kind does: draw the next request; build what it needs before the load."""

    name: str

    @property
    def needs_tokenizer(self) -> bool:
        """Whether `prepare` counts tokens with the run's tokenizer before the load."""
        ...

    def next_request(self, rng: random.Random) -> LLMRequest: ...

    def prepare(
        self,
        tok: Tokenizer,
        *,
        chat: bool = True,
        worker: int = 0,
        progress: Callable[[str], None] = ...,
    ) -> object: ...


__all__ = ["LLMRequest", "Messages", "Prompt", "Workload"]
