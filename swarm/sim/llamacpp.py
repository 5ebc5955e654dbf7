"""The simulator speaking as llama.cpp's `llama-server` (`swarm sim --server llamacpp`): requests.

The engine is the same (slots = `--max-num-seqs`, each slot's context = `--max-model-len`, the
queue behind full slots = llama.cpp's deferred requests); what differs is the face, held to a
real llama-server (b11434, built here) by tests/e2e/test_llamacpp_conformance.py. This module
reads requests as llama-server does and answers its errors and /v1/models:

- errors: `{"error": {"code", "message", "type"}}` (`invalid_request_error`; a prompt past a
  slot's context is `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`); the model
  a request names is not checked (llama-server answers any name with its one model).
- /v1/models in llama.cpp's shape.

The rest of the face: its answers (stream events, the full body, timings, usage) in
swarm/sim/llamacpp_render.py, its /metrics in llamacpp_metrics.py, /tokenize, /detokenize and
/apply-template in llamacpp_tokenizer.py.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from swarm.core.tokens import chat_prompt_tokens, message_text, tokenize
from swarm.sim.protocol import ApiError, GenRequest
from swarm.sim.tool_calls import read_llamacpp_choice, read_tools

SERVER = "llamacpp"
SSE_HEADERS = {
    "Server": "llama.cpp",
    "X-Accel-Buffering": "no",
    "Content-Type": "text/event-stream",
    "Keep-Alive": "timeout=5, max=100",
}
FINGERPRINT = "b0-unknown"  # what a llama-server built from the PyPI sdist reports
_MAX_N_PREDICT = 2147483647


class LlamaError(ApiError):
    """An error answered as llama.cpp does: `{"error": {"code", "message", "type", ...extra}}`."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", **extra: int):
        super().__init__(status, message, type)
        self.extra = extra

    def body(self) -> bytes:
        return orjson.dumps(
            {"error": {"code": self.status, "message": self.message, "type": self.type, **self.extra}}
        )


# llama.cpp's 404 (unknown path or method) has its keys in another order than its 400s
NOT_FOUND_BODY = orjson.dumps(
    {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}}
)


def load_body(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body; nlohmann::json's parse error as llama.cpp answers it."""
    try:
        body = json.loads(raw)
    except ValueError as e:
        line, col = getattr(e, "lineno", 1), getattr(e, "colno", 1) + 1
        where = "object key" if getattr(e, "msg", "").startswith("Expecting property name") else "value"
        start = max(0, getattr(e, "pos", 0) - 1)
        last = raw[: start + 2].decode("utf-8", "replace")
        raise LlamaError(
            400,
            f"[json.exception.parse_error.101] parse error at line {line}, column {col}: syntax error "
            f"while parsing {where} - invalid literal; last read: '{last}'",
        ) from None
    if not isinstance(body, dict):
        raise LlamaError(400, "[json.exception.type_error.306] cannot use value() with array")
    return body


def _number(body: dict[str, Any], key: str, lo: int | None = None) -> int | float | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        kind = "string" if isinstance(v, str) else type(v).__name__
        raise LlamaError(
            400, f"Field '{key}': [json.exception.type_error.302] type must be number, but is {kind}"
        )
    if lo is not None and v < lo:
        raise LlamaError(
            400, f"Field '{key}': Value must be between {lo} <= value <= {_MAX_N_PREDICT}, but got {v}"
        )
    return v


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `messages` of a chat body, checked as llama-server checks them."""
    if "messages" not in body:
        raise LlamaError(400, "'messages' is required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise LlamaError(400, "Expected 'messages' to be an array")
    for m in messages:
        if not isinstance(m, dict):
            raise LlamaError(400, "Expected 'message' to be an object")
        try:
            message_text(m.get("content"))
        except TypeError:
            raise LlamaError(400, "Invalid 'content' type") from None
    return messages


def parse_request(body: dict[str, Any], endpoint: str, n_ctx: int) -> GenRequest:
    """A chat or completion body as llama-server reads it (its checks, its errors, its defaults)."""
    tools, choice = None, "none"
    if endpoint == "chat":
        messages = messages_of(body)
        try:
            tools = read_tools(body.get("tools"))
            choice = read_llamacpp_choice(body.get("tool_choice"), tools)
        except ValueError as e:
            raise LlamaError(400, str(e)) from None
        pieces = chat_prompt_tokens(messages, body.get("tools"))
    else:
        if "prompt" not in body:
            raise LlamaError(400, "[json.exception.out_of_range.403] key 'prompt' not found")
        prompt = body["prompt"]
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if isinstance(prompt, str):
            pieces = tokenize(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            pieces = [str(t) for t in prompt]
        else:
            raise LlamaError(
                400,
                '"prompt" must be a string, an list of tokens, a list of mixed strings & tokens, or a list of prompts',
            )
    _number(body, "temperature")
    n_predict = _number(
        body, "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens", -1
    )
    n_predict = -1 if n_predict is None else int(n_predict)
    stream = body.get("stream") is True
    opts = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    prompt_tokens = len(pieces)
    if prompt_tokens >= n_ctx:
        raise LlamaError(
            400,
            f"request ({prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), "
            "try increasing it",
            "exceed_context_size_error",
            n_prompt_tokens=prompt_tokens,
            n_ctx=n_ctx,
        )
    room = n_ctx - prompt_tokens
    # -1 = until EOS or the context is full; llama.cpp makes at least one token even for 0
    max_tokens = room if n_predict < 0 else min(max(n_predict, 1), room)
    thinking = None
    kwargs = body.get("chat_template_kwargs")
    if endpoint == "chat" and isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        thinking = kwargs["enable_thinking"]
    return GenRequest(
        endpoint=endpoint,
        stream=stream,
        include_usage=stream and opts.get("include_usage") is True,
        continuous_usage=False,
        max_tokens=max_tokens,
        min_tokens=0,
        ignore_eos=body.get("ignore_eos") is True,
        thinking=thinking,
        prompt_tokens=prompt_tokens,
        prompt_pieces=pieces,
        tools=tools,
        tool_choice=choice,
    )


def models_body(model: str, n_ctx: int, created: int) -> dict[str, Any]:
    """/v1/models as llama-server answers it (Ollama-style `models` and OpenAI-style `data`)."""
    return {
        "models": [
            {
                "name": model,
                "model": model,
                "modified_at": "",
                "size": "",
                "digest": "",
                "type": "model",
                "description": "",
                "tags": [""],
                "capabilities": ["completion"],
                "parameters": "",
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": "",
                    "families": [""],
                    "parameter_size": "",
                    "quantization_level": "",
                },
            }
        ],
        "object": "list",
        "data": [
            {
                "id": model,
                "aliases": [model],
                "tags": [],
                "object": "model",
                "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
                "created": created,
                "owned_by": SERVER,
                "meta": {"n_ctx": n_ctx},
            }
        ],
    }
