"""Request bodies in, `GenRequest` out; anything malformed becomes a vLLM-shaped `ApiError`.

Statuses, error types, `param`s and messages are those a real vLLM (0.32, CPU build) was seen
to answer, and tests/e2e/test_vllm_conformance.py keeps them so: a body that does not fit the schema
gets FastAPI's validation error (type "Bad Request", `param` "body.<field>"); a failed semantic
check gets a `BadRequestError` whose message ends "(parameter=..., value=...)"; an unknown model
a 404 `NotFoundError`. A prompt that leaves no room for output is refused; a `max_tokens` past
what the context leaves is cut to it (finish "length"), and only one past `max_model_len`
itself is refused. Prompt tokens are counted with `swarm.core.tokens` (chat: template cost per
message, see that module).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from swarm.core.tokens import chat_prompt_tokens, tokenize
from swarm.sim.tool_calls import ToolSpec, read_choice, read_tools

TOKEN_ID_SPACE = 151_936  # the stand-in token ids /tokenize answers lie below this (Qwen2's vocabulary size)


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
    tools: tuple[ToolSpec, ...] | None = None  # chat `tools` (swarm/sim/tool_calls.py)
    tool_choice: str = "none"  # none | auto | required | the named function


def _bad(message: str, param: str | None = None, value: Any = None) -> ApiError:
    """A semantic check failed (vLLM's `BadRequestError`); vLLM appends "(parameter=..., value=...)"
    to the message when it names the parameter."""
    if param is not None:
        message += f" (parameter={param})" if value is None else f" (parameter={param}, value={value})"
    return ApiError(400, message, "BadRequestError", param)


def _shown(v: Any) -> str:
    """An input as vLLM's validation messages show it."""
    if isinstance(v, dict):
        return f"'<dict of {len(v)} items>'"
    if isinstance(v, list):
        return f"'<list of {len(v)} items>'"
    return repr(v)


def _invalid(kind: str, loc: str, msg: str, v: Any, ctx: dict[str, str] | None = None) -> ApiError:
    """The request does not fit the schema: vLLM answers FastAPI's validation error as a
    400 of type "Bad Request" whose `param` is the field's location ("body.messages")."""
    extra = f", 'ctx': {ctx!r}" if ctx else ""
    message = f"1 validation error:\n  {{'type': '{kind}', 'loc': '{loc}', 'msg': '{msg}', 'input': {_shown(v)}{extra}}}"
    return ApiError(400, message, "Bad Request", loc)


def _opt_int(body: dict[str, Any], key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            raise _invalid(
                "int_parsing",
                f"body.{key}",
                "Input should be a valid integer, unable to parse string as an integer",
                v,
            )
        raise _invalid("int_type", f"body.{key}", "Input should be a valid integer", v)
    return v


def _opt_bool(body: dict[str, Any], key: str, default: bool = False, loc: str = "body") -> bool:
    v = body.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _invalid(
            "bool_type" if not isinstance(v, str) else "bool_parsing",
            f"{loc}.{key}",
            "Input should be a valid boolean",
            v,
        )
    return v


def load_body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # (the stdlib parser, for the position and wording FastAPI reports)
            json.loads(raw)
            pos, why = 0, "Invalid JSON"
        except ValueError as e:
            pos, why = getattr(e, "pos", 0), getattr(e, "msg", str(e))
        raise _invalid("json_invalid", f"body.{pos}", "JSON decode error", {}, {"error": why}) from None
    if not isinstance(body, dict):
        raise _invalid(
            "model_attributes_type",
            "body",
            "Input should be a valid dictionary or object to extract fields from",
            body,
        )
    return body


def check_model(body: dict[str, Any], served: str | Sequence[str]) -> str:
    """The served model `body` names (the first when it names none, as vLLM does); vLLM's 404 else."""
    names = (served,) if isinstance(served, str) else tuple(served)
    model = body.get("model")
    if model is None:
        return names[0]  # vLLM serves its (base) model when none is named
    if not isinstance(model, str) or model not in names:
        raise ApiError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {', '.join(names)}.",
            "NotFoundError",
            "model",
        )
    return model


def _stream_options(body: dict[str, Any], stream: bool) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats) of `stream_options`, checked as vLLM checks them."""
    opts = body.get("stream_options")
    if opts is None:
        return False, False
    if not isinstance(opts, dict):
        raise _invalid(
            "model_type",
            "body.stream_options",
            "Input should be a valid dictionary or instance of StreamOptions",
            opts,
        )
    if not stream:
        raise _bad("Stream options can only be defined when `stream=True`.", "stream_options")
    include_usage = _opt_bool(opts, "include_usage", loc="body.stream_options")
    # as in vLLM: running usage only when the final usage chunk is asked for too
    continuous = include_usage and _opt_bool(opts, "continuous_usage_stats", loc="body.stream_options")
    return include_usage, continuous


def _check_sampling(body: dict[str, Any]) -> None:
    """`n` (1 only, on the simulator) and `temperature` (a non-negative number)."""
    n = _opt_int(body, "n")
    if n is not None and n != 1:
        raise _bad(f"n must be 1 on the simulator, got {n}.", "n", n)
    temperature = body.get("temperature")
    if temperature is None:
        return
    if isinstance(temperature, str):
        raise _invalid(
            "float_parsing",
            "body.temperature",
            "Input should be a valid number, unable to parse string as a number",
            temperature,
        )
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise _invalid("float_type", "body.temperature", "Input should be a valid number", temperature)
    if temperature < 0:
        raise _bad(f"temperature must be non-negative, got {temperature}.", "temperature", temperature)


def _token_bounds(body: dict[str, Any], endpoint: str) -> tuple[int | None, int]:
    """(max_tokens as asked, None when not; min_tokens), each checked and against each other."""
    max_tokens = _opt_int(body, "max_completion_tokens") if endpoint == "chat" else None
    if max_tokens is None:
        max_tokens = _opt_int(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise _bad(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    min_tokens = _opt_int(body, "min_tokens") or 0
    if min_tokens < 0:
        raise _bad(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if max_tokens is not None and min_tokens > max_tokens:
        raise _bad(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.")
    return max_tokens, min_tokens


def _fit_context(max_tokens: int | None, prompt_tokens: int, max_model_len: int) -> int:
    """The output tokens the request gets: a `max_tokens` past `max_model_len` or a prompt that
    leaves no room is refused; no max_tokens, or one past what the context leaves, is cut to it
    (finish "length")."""
    if max_tokens is not None and max_tokens > max_model_len:
        raise _bad(
            f"max_tokens={max_tokens} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            "max_tokens",
            max_tokens,
        )
    if prompt_tokens >= max_model_len:
        # vLLM counts at most max_model_len + 1 tokens of a prompt, hence "at least"
        seen = min(prompt_tokens, max_model_len + 1)
        raise _bad(
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
            f"contains at least {seen} input tokens, which exceeds this limit even without any output "
            "tokens. Please reduce the length of the input prompt.",
            "input_tokens",
            seen,
        )
    room = max_model_len - prompt_tokens
    return room if max_tokens is None else min(max_tokens, room)


def _thinking(body: dict[str, Any], endpoint: str) -> bool | None:
    """A chat's `chat_template_kwargs.enable_thinking`; None (the server's default) when not given."""
    if endpoint != "chat":
        return None
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        return None
    if not isinstance(kwargs, dict):
        raise _invalid("dict_type", "body.chat_template_kwargs", "Input should be a valid dictionary", kwargs)
    if kwargs.get("enable_thinking") is None:
        return None
    return _opt_bool(kwargs, "enable_thinking", loc="body.chat_template_kwargs")


def _common(body: dict[str, Any], endpoint: str, pieces: list[str], max_model_len: int) -> GenRequest:
    """The checks and fields chat and completions share, in the order vLLM reports them."""
    stream = _opt_bool(body, "stream")
    include_usage, continuous = _stream_options(body, stream)
    _check_sampling(body)
    asked, min_tokens = _token_bounds(body, endpoint)
    ignore_eos = _opt_bool(body, "ignore_eos")
    max_tokens = _fit_context(asked, len(pieces), max_model_len)
    return GenRequest(
        endpoint=endpoint,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        max_tokens=max_tokens,
        min_tokens=min(min_tokens, max_tokens),
        ignore_eos=ignore_eos,
        thinking=_thinking(body, endpoint),
        prompt_tokens=len(pieces),
        prompt_pieces=pieces,
    )


def parse_chat(body: dict[str, Any], max_model_len: int) -> GenRequest:
    messages = body.get("messages")
    if messages is None:
        raise _invalid("missing", "body.messages", "Field required", body)
    if not isinstance(messages, list):
        raise _invalid("list_type", "body.messages", "Input should be a valid list", messages)
    if not messages:
        raise _bad("Cannot apply chat template to an empty conversation. Provide at least one message.")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _invalid(
                "model_type", f"body.messages.{i}", "Input should be an object with a string 'role'", m
            )
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise _invalid(
                "string_type", f"body.messages.{i}.content", "Input should be a valid string", content
            )
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise _invalid(
                "model_type", f"body.messages.{i}.content", "Input should be a list of content parts", content
            )
    try:
        tools = read_tools(body.get("tools"))
        choice = read_choice(body.get("tool_choice"), tools)
    except ValueError as e:
        raise _bad(str(e), "tools") from None
    req = _common(body, "chat", chat_prompt_tokens(messages, body.get("tools")), max_model_len)
    req.tools, req.tool_choice = tools, choice
    return req


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


MAX_KNOWN_PIECES = 1 << 16  # stand-in ids /detokenize can answer (the first pieces /tokenize met)
_PIECES: dict[int, str] = {}


def piece_ids(pieces: Sequence[str]) -> list[int]:
    """Stable stand-in ids (crc32 of the piece), remembered for /detokenize: an id decodes to the
    first piece it stood for in this process (up to MAX_KNOWN_PIECES ids)."""
    ids = []
    for p in pieces:
        i = zlib.crc32(p.encode()) % TOKEN_ID_SPACE
        if i not in _PIECES and len(_PIECES) < MAX_KNOWN_PIECES:
            _PIECES[i] = p
        ids.append(i)
    return ids


def detokenize_text(tokens: Any, param: str = "tokens") -> str:
    """The text of stand-in ids that /tokenize answered; an id it never answered is a 400."""
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        raise _invalid("list_type", f"body.{param}", "Input should be a valid list of integers", tokens)
    unknown = next((t for t in tokens if t not in _PIECES), None)
    if unknown is not None:
        raise _bad(f"token id {unknown} is not one this server's /tokenize answered", param, unknown)
    return "".join(_PIECES[t] for t in tokens)


def detokenize_answer(body: dict[str, Any]) -> dict[str, Any]:
    """vLLM's `/detokenize`: `{"tokens"}` -> `{"prompt"}`."""
    return {"prompt": detokenize_text(body.get("tokens"))}


def tokenize_answer(body: dict[str, Any], max_model_len: int) -> dict[str, Any]:
    """vLLM's `/tokenize` answer for a prompt-form or chat-form body, with the pseudo-tokenizer:
    the chat form counts exactly what a chat request's `usage.prompt_tokens` will say."""
    if body.get("messages") is not None:
        messages = body["messages"]
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise _invalid("list_type", "body.messages", "Input should be a valid list", messages)
        pieces = chat_prompt_tokens(messages)
    elif isinstance(body.get("prompt"), str):
        pieces = tokenize(body["prompt"])
    else:
        raise _bad("Either `prompt` or `messages` must be given.")
    ids = piece_ids(pieces)
    strs = pieces if body.get("return_token_strs") is True else None
    return {"count": len(pieces), "max_model_len": max_model_len, "tokens": ids, "token_strs": strs}
