"""Server dialects: how to ask for a streamed completion, and how to read what comes back.

A dialect is one registry entry (vLLM bench style), not a branch in every function. Each family's
quirks are taken from its source at a pinned version (docs/server-families.md); only what differs
from vLLM becomes a field here:

| dialect  | reasoning field(s)                 | running usage            | thinking switch        | ignore_eos |
|----------|------------------------------------|--------------------------|------------------------|------------|
| vllm     | `reasoning`, `reasoning_content`   | `continuous_usage_stats` | `chat_template_kwargs` | yes        |
| sglang   | `reasoning_content`                | `continuous_usage_stats` | `chat_template_kwargs` | yes        |
| trtllm   | `reasoning_content`, `reasoning`   | `continuous_usage_stats` | `chat_template_kwargs` | yes        |
| llamacpp | `reasoning_content`                | no (`timings` at end)    | `chat_template_kwargs` | yes        |
| tgi      | none: `<think>` inside `content`   | no (usage chunk at end)  | not sent               | no         |
| ollama   | `reasoning`                        | no (usage chunk at end)  | not sent               | no         |
| openai   | `reasoning`, `reasoning_content`   | no                       | not sent               | no         |

Every dialect asks for `stream_options.include_usage` (TGI and Ollama send usage only then, as one
`choices: []` chunk after the last token; TensorRT-LLM has it on by default). What needs no field:
error bodies (vLLM/OpenAI/Ollama nest `{"error": {"message"}}`, SGLang and TensorRT-LLM put
`{"object": "error", "message"}` at the top level, TGI sends `{"error": "<text>", "error_type"}`)
are all read by `error_message`, in a body or inside a stream; finish chunks with an empty delta
(llama.cpp, Ollama) and TGI's usage chunk with `"id": ""` are read as vLLM's are. TensorRT-LLM
refuses any request field it does not declare (pydantic `extra="forbid"`): `body` writes only
fields its `ChatCompletionRequest` / `CompletionRequest` declare (`model`, `messages` / `prompt`,
`max_tokens`, `stream`, `stream_options`, `chat_template_kwargs`, `ignore_eos`, `user`).

Detection (`detect_dialect`) reads `/v1/models`' `owned_by`: `vllm`, `sglang`, `tensorrt_llm`,
`llamacpp` name themselves; TGI writes the model id itself there; Ollama writes the model name's
namespace, `library` for its official models. Anything else is `openai`; `--dialect` overrides.
A wrong guess does not go unseen: swarm/client/mismatch.py says once per run when a stream
carries what the dialect does not read.

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
from swarm.core.options import CACHE_SALT_DIALECTS

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    reasoning_fields: tuple[str, ...]  # delta keys that carry reasoning text, checked in order
    continuous_usage: bool  # ask for a running usage on every chunk (continuous_usage_stats)
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
        cache_salt: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
    ) -> bytes:
        """The JSON request body for one streamed request. `cache_salt`: vLLM's per-request salt of
        its prefix-cache hashes (--prefix-cache bust), sent only where the dialect `takes_salt`.
        `tools` / `tool_choice`: an agent step's (chat only; OpenAI's shapes)."""
        stream_options: dict[str, bool] = {"include_usage": True}
        if self.continuous_usage:
            stream_options["continuous_usage_stats"] = True
        body: dict[str, Any] = {}
        if model:
            body["model"] = model
        if endpoint == "chat":
            body["messages"] = messages
            if tools:
                body["tools"] = tools
                if tool_choice is not None:
                    body["tool_choice"] = tool_choice
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
        if cache_salt is not None:
            body["cache_salt"] = cache_salt
        return orjson.dumps(body)

    @property
    def takes_salt(self) -> bool:
        """Whether the server takes a per-request `cache_salt` (vLLM's OpenAI server)."""
        return self.name in CACHE_SALT_DIALECTS


DIALECTS: dict[str, Dialect] = {
    "vllm": Dialect("vllm", ("reasoning", "reasoning_content"), True, True, True),
    "sglang": Dialect("sglang", ("reasoning_content",), True, True, True),
    "trtllm": Dialect("trtllm", ("reasoning_content", "reasoning"), True, True, True),
    "llamacpp": Dialect("llamacpp", ("reasoning_content",), False, True, True),
    "tgi": Dialect("tgi", (), False, False, False),
    "ollama": Dialect("ollama", ("reasoning",), False, False, False),
    "openai": Dialect("openai", ("reasoning", "reasoning_content"), False, False, False),
}

OWNERS: dict[str, str] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "tensorrt_llm": "trtllm",
    "llamacpp": "llamacpp",
    "llama.cpp": "llamacpp",
    "llama_cpp": "llamacpp",
}
"""`/v1/models` `owned_by` values that name a family (lower-cased), and its dialect."""

OLLAMA_NAMESPACE = "library"
"""Ollama's `owned_by`: the namespace of the model name, `library` for its official models."""

ENDPOINTS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise UsageError(f"unknown dialect {name!r}; choose one of {', '.join(DIALECTS)}") from None


def detect_dialect(models: Any) -> str:
    """Dialect from a `/v1/models` answer: vLLM, SGLang, TensorRT-LLM and llama.cpp name themselves
    in `owned_by`; TGI puts the model id there, Ollama the model's namespace (`library`)."""
    try:
        cards = [(str(m.get("id", "")), str(m.get("owned_by", ""))) for m in models["data"]]
    except (KeyError, TypeError, AttributeError):
        return "openai"
    owners = {owner.lower() for _, owner in cards}
    for owner, name in OWNERS.items():
        if owner in owners:
            return name
    if cards and all(mid and owner == mid for mid, owner in cards):
        return "tgi"
    if OLLAMA_NAMESPACE in owners:
        return "ollama"
    return "openai"


def ignore_eos_dialects() -> str:
    """The dialects that take `ignore_eos`, for a line that refuses it."""
    return ", ".join(name for name, d in DIALECTS.items() if d.ignore_eos)


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
    """The human message of an error body, in every family's shape (or of any JSON value): nested
    `{"error": {"message"}}` (OpenAI, vLLM, llama.cpp, Ollama), top-level `{"object": "error",
    "message"}` (SGLang, TensorRT-LLM), `{"error": "<text>"}` (TGI, TensorRT-LLM validation)."""
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or err.get("detail") or err.get("type")
        if msg is None:
            return str(err)[:300]
        return str(msg)[:300]
    return str(err)[:300]
