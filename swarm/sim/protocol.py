"""Request bodies in, `GenRequest` out; anything malformed becomes a vLLM-shaped `ApiError`.

Checks and messages follow vLLM's OpenAI server (0.33): `max_tokens must be at least 1`,
the context-length messages, ``The model `x` does not exist.`` (404, as vLLM answers), and
`Stream options can only be defined when stream=True.`. Prompt tokens are counted with
`swarm.tokens` (chat: template cost per message, see that module).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from swarm.tokens import chat_prompt_tokens, tokenize


class ApiError(Exception):
    """An error answered as `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(self, status: int, message: str, type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param

    def body(self) -> bytes:
        return orjson.dumps(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}}
        )


@dataclass(slots=True)
class GenRequest:
    endpoint: str  # "chat" | "completions"
    stream: bool
    include_usage: bool
    continuous_usage: bool
    max_tokens: int  # resolved: the request's value or what the context leaves
    min_tokens: int
    ignore_eos: bool
    thinking: bool | None  # chat_template_kwargs.enable_thinking; None = server default
    prompt_tokens: int
    prompt_pieces: list[str] = field(repr=False)  # pseudo-tokens, for prefix-cache hashing


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, "BadRequestError", param)


def _opt_int(body: dict[str, Any], key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"{key} must be an integer, got {v!r}.", key)
    return v


def _opt_bool(body: dict[str, Any], key: str, default: bool = False) -> bool:
    v = body.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _bad(f"{key} must be a boolean, got {v!r}.", key)
    return v


def load_body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise _bad(f"JSON decode error: {e}", "body") from None
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.", "body")
    return body


def check_model(body: dict[str, Any], served: str) -> None:
    model = body.get("model")
    if model is None:
        return  # vLLM serves its one model when none is named
    if not isinstance(model, str) or model != served:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")


def _common(body: dict[str, Any], endpoint: str, pieces: list[str], max_model_len: int) -> GenRequest:
    stream = _opt_bool(body, "stream")
    opts = body.get("stream_options")
    include_usage = continuous = False
    if opts is not None:
        if not isinstance(opts, dict):
            raise _bad("stream_options must be an object.", "stream_options")
        if not stream:
            raise _bad("Stream options can only be defined when `stream=True`.", "stream_options")
        include_usage = _opt_bool(opts, "include_usage")
        # as in vLLM: running usage only when the final usage chunk is asked for too
        continuous = include_usage and _opt_bool(opts, "continuous_usage_stats")
    n = _opt_int(body, "n")
    if n is not None and n != 1:
        raise _bad(f"n must be 1 on the simulator, got {n}.", "n")
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise _bad(f"temperature must be a number, got {temperature!r}.", "temperature")
        if temperature < 0:
            raise _bad(f"temperature must be non-negative, got {temperature}.", "temperature")
    max_tokens = _opt_int(body, "max_completion_tokens") if endpoint == "chat" else None
    if max_tokens is None:
        max_tokens = _opt_int(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise _bad(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    min_tokens = _opt_int(body, "min_tokens") or 0
    if min_tokens < 0:
        raise _bad(f"min_tokens must be greater than or equal to 0, got {min_tokens}.", "min_tokens")
    if max_tokens is not None and min_tokens > max_tokens:
        raise _bad(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
            "min_tokens",
        )
    ignore_eos = _opt_bool(body, "ignore_eos")
    prompt_tokens = len(pieces)
    if prompt_tokens >= max_model_len:
        raise _bad(
            f"This model's maximum context length is {max_model_len} tokens. However, your request has "
            f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
            "input_tokens",
        )
    if max_tokens is None:
        max_tokens = max_model_len - prompt_tokens
    elif prompt_tokens + max_tokens > max_model_len:
        raise _bad(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
            f"context length is {max_model_len} tokens and your request has {prompt_tokens} input tokens "
            f"({max_tokens} > {max_model_len} - {prompt_tokens}).",
            "max_tokens",
        )
    thinking = None
    if endpoint == "chat":
        kwargs = body.get("chat_template_kwargs")
        if kwargs is not None:
            if not isinstance(kwargs, dict):
                raise _bad("chat_template_kwargs must be an object.", "chat_template_kwargs")
            if kwargs.get("enable_thinking") is not None:
                thinking = _opt_bool(kwargs, "enable_thinking")
    return GenRequest(
        endpoint=endpoint,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        max_tokens=max_tokens,
        min_tokens=min(min_tokens, max_tokens),
        ignore_eos=ignore_eos,
        thinking=thinking,
        prompt_tokens=prompt_tokens,
        prompt_pieces=pieces,
    )


def parse_chat(body: dict[str, Any], max_model_len: int) -> GenRequest:
    messages = body.get("messages")
    if messages is None:
        raise _bad("Field required: messages", "messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages must be a non-empty list of message objects.", "messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a string 'role'.", f"messages.{i}")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise _bad(f"messages[{i}].content must be a string or a list of content parts.", f"messages.{i}")
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise _bad(f"messages[{i}].content parts must be objects.", f"messages.{i}")
    return _common(body, "chat", chat_prompt_tokens(messages), max_model_len)


def parse_completion(body: dict[str, Any], max_model_len: int) -> GenRequest:
    prompt = body.get("prompt")
    if prompt is None:
        raise _bad("Field required: prompt", "prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        pieces = tokenize(prompt)
    elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        pieces = [str(t) for t in prompt]  # token ids: one token each
    else:
        raise _bad("prompt must be a string, a list of token ids, or a list of one of those.", "prompt")
    if not pieces:
        raise _bad("The prompt cannot be empty.", "prompt")
    return _common(body, "completions", pieces, max_model_len)
