"""Server dialects: how to ask for a streamed completion, and how to read what comes back.

A dialect is one registry entry (vLLM bench style), not a branch in every function:

| dialect  | reasoning field(s)                 | running usage            | thinking switch          |
|----------|------------------------------------|--------------------------|--------------------------|
| vllm     | `reasoning`, `reasoning_content`   | `continuous_usage_stats` | `chat_template_kwargs`   |
| llamacpp | `reasoning_content`                | no (`timings` at end)    | `chat_template_kwargs`   |
| openai   | `reasoning`, `reasoning_content`   | no                       | not sent                 |

`StreamTally` reads the parsed chunks of one response and keeps only what the record needs.
Which chunk carries a generated token (REFERENCE.md §2): with a running `usage` on every chunk
(vLLM's `continuous_usage_stats`) a chunk carries tokens iff `completion_tokens` grew — exact,
even for a token that decodes to "" (half a UTF-8 character) or for the reasoning parser's
multi-token chunks. Without it the chunk structure decides: a chunk carries one token if its
delta has `content` or a reasoning field, unless it is the role chunk (`role` present and the
text empty); `delta: {}` finish chunks and usage-only chunks (`choices: []`) carry none.

Reasoning merged into the content (a server without a reasoning parser: `<think>...</think>`
inside `content`) is split the same way as a separate reasoning field, so TTFA and reasoning
token counts agree across the two forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from swarm.core.errors import UsageError

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    reasoning_fields: tuple[str, ...]  # delta keys that carry reasoning text, checked in order
    continuous_usage: bool  # ask for a running usage on every chunk (vLLM only)
    thinking_switch: bool  # send chat_template_kwargs.enable_thinking (Qwen3-style templates)
    ignore_eos: bool  # documents `ignore_eos` (force the output length); `--ignore-eos` is refused otherwise

    def body(
        self,
        *,
        endpoint: str,
        model: str | None,
        messages: list[dict[str, Any]] | None,
        prompt: str | None,
        max_tokens: int,
        thinking: bool | None,
        ignore_eos: bool = False,
        user: str | None = None,
    ) -> bytes:
        """The JSON request body for one streamed request."""
        stream_options: dict[str, bool] = {"include_usage": True}
        if self.continuous_usage:
            stream_options["continuous_usage_stats"] = True
        body: dict[str, Any] = {}
        if model:
            body["model"] = model
        if endpoint == "chat":
            body["messages"] = messages
            if thinking is not None and self.thinking_switch:
                body["chat_template_kwargs"] = {"enable_thinking": thinking}
        else:
            body["prompt"] = prompt
        body["max_tokens"] = max_tokens
        body["stream"] = True
        body["stream_options"] = stream_options
        if ignore_eos:  # sent as asked; the options refuse it for a dialect known not to take it
            body["ignore_eos"] = True
        if user is not None:  # OpenAI's end-user id; the trace replay names its row with it
            body["user"] = user
        return orjson.dumps(body)


DIALECTS: dict[str, Dialect] = {
    "vllm": Dialect("vllm", ("reasoning", "reasoning_content"), True, True, True),
    "llamacpp": Dialect("llamacpp", ("reasoning_content",), False, True, True),
    "openai": Dialect("openai", ("reasoning", "reasoning_content"), False, False, False),
}

ENDPOINTS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise UsageError(f"unknown dialect {name!r}; choose one of {', '.join(DIALECTS)}") from None


def detect_dialect(models: Any) -> str:
    """Dialect from a `/v1/models` answer: vLLM and llama.cpp name themselves in `owned_by`."""
    try:
        owners = {str(m.get("owned_by", "")).lower() for m in models["data"]}
    except (KeyError, TypeError, AttributeError):
        return "openai"
    if "vllm" in owners:
        return "vllm"
    if owners & {"llamacpp", "llama.cpp", "llama_cpp"}:
        return "llamacpp"
    return "openai"


def first_model(models: Any) -> str | None:
    """The first model id a `/v1/models` answer lists, or None."""
    try:
        return str(models["data"][0]["id"])
    except (KeyError, IndexError, TypeError):
        return None


def max_model_len(models: Any, model: str | None) -> int | None:
    """The `max_model_len` a `/v1/models` answer gives for `model` (vLLM lists it), or None."""
    try:
        for m in models["data"]:
            if m["id"] == model and isinstance(m.get("max_model_len"), int):
                return int(m["max_model_len"])
    except (KeyError, TypeError):
        pass
    return None


def model_ids(models: Any) -> list[str]:
    """Every model id a `/v1/models` answer lists (LoRA adapters included: vLLM lists them too)."""
    try:
        return [str(m["id"]) for m in models["data"]]
    except (KeyError, TypeError):
        return []


def error_message(payload: Any) -> str:
    """The human message of an OpenAI / vLLM / llama.cpp error object (or of any JSON value)."""
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or err.get("detail") or err.get("type")
        if msg is None:
            return str(err)[:300]
        return str(msg)[:300]
    return str(err)[:300]
