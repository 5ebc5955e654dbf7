"""The simulator speaking as llama.cpp's `llama-server` (`swarm sim --server llamacpp`).

The engine is the same (slots = `--max-num-seqs`, each slot's context = `--max-model-len`, the
queue behind full slots = llama.cpp's deferred requests); what differs is the face, held to a
real llama-server (b11434, built here) by tests/e2e/test_llamacpp_conformance.py:

- stream events: `{"choices":[...],"created","id","model","system_fingerprint","object"}` with
  a role event whose `content` is null (missing when the first token ends inside a UTF-8
  character, as with llama-server), one event per token except that a token ending inside a
  UTF-8 character is held and sent with the next (several tokens per event), a finish event with
  `delta: {}`, and llama.cpp's `timings`: on the finish event without `include_usage`, on a
  `choices: []` usage event with it. Completions put usage and timings on their last event.
- usage carries `prompt_tokens_details.cached_tokens` (= timings.cache_n, the prefix-cache hit).
- errors: `{"error": {"code", "message", "type"}}` (`invalid_request_error`; a prompt past a
  slot's context is `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`); the model
  a request names is not checked (llama-server answers any name with its one model).
- /metrics: the `llamacpp:` families `llama-server --metrics` exposes, no histograms.
- /v1/models, /tokenize (`content`, `with_pieces`) and /apply-template in llama.cpp's shapes:
  /apply-template + /tokenize count exactly what a chat request's usage says.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from swarm.core.tokens import chat_prompt_tokens, message_text, tokenize
from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.protocol import ApiError, GenRequest, detokenize_text, piece_ids
from swarm.sim.render import DONE, TAPE_MASK, Output, Tape

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
    if endpoint == "chat":
        messages = messages_of(body)
        pieces = chat_prompt_tokens(messages)
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
    )


def timings(seq: EngineSequence, prompt_tokens: int, predicted: int) -> dict[str, float | int]:
    """llama.cpp's `timings` of a request from the engine's timestamps (ms; per-second rates 0 when
    the span is 0, as llama.cpp writes them)."""
    cache_n = min(seq.cached_tokens, prompt_tokens)
    prompt_n = prompt_tokens - cache_n
    sched = seq.scheduled_time or seq.arrival_time
    first = seq.first_token_time or sched
    last = seq.last_token_time or first
    prompt_ms = max(0.0, (first - sched) * 1e3)
    predicted_ms = max(0.0, (last - first) * 1e3)
    return {
        "cache_n": cache_n,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": 1e3 * prompt_n / prompt_ms if prompt_ms else 0.0,
        "predicted_n": predicted,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / predicted if predicted else 0.0,
        "predicted_per_second": 1e3 * predicted / predicted_ms if predicted_ms else 0.0,
    }


def usage(prompt_tokens: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "completion_tokens": completion,
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": min(cached, prompt_tokens)},
    }


class LlamaStreamRenderer:
    """llama-server's SSE events for one request (same calls as swarm.sim.render.StreamRenderer)."""

    def __init__(self, tape: Tape, out: Output, model: str, endpoint: str, include_usage: bool) -> None:
        self.tape, self.out, self.include_usage = tape, out, include_usage
        self.chat = endpoint == "chat"
        self.created = out.created
        self.model = orjson.dumps(model)
        rid = out.id.encode()
        if self.chat:
            self.head = b'data: {"choices":[{"finish_reason":null,"index":0,"delta":'
            self.tail = (
                b'}],"created":%d,"id":"%s","model":%s,"system_fingerprint":"%s","object":"chat.completion.chunk"}\n\n'
                % (out.created, rid, self.model, FINGERPRINT.encode())
            )
        else:
            self.head = b'data: {"choices":[{"text":'
            self.tail = (
                b',"index":0,"logprobs":null,"finish_reason":null}],"created":%d,"model":%s,'
                b'"system_fingerprint":"%s","object":"text_completion","id":"%s"}\n\n'
                % (out.created, self.model, FINGERPRINT.encode(), rid)
            )

    def role_chunk(self) -> bytes:
        """The role event; none when the first token ends inside a UTF-8 character (llama-server then
        sends its first event with the first text, without the role: seen at b11434)."""
        if self.tape.empty[self.out.offset & TAPE_MASK]:
            return b""
        return self.head + b'{"role":"assistant","content":null}' + self.tail

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        """Events of tokens [start, end): one per token; an empty-text token (a UTF-8 character cut
        in two) is held and goes with the next; the EOS token of a stop sends nothing."""
        tape, out = self.tape, self.out
        off, r_end = out.offset, out.reasoning_tokens
        stop_at = out.target_tokens - 1 if out.finish_reason == "stop" else -1
        head, tail, empty = self.head, self.tail, tape.empty
        if self.chat:
            content, reasoning = tape.content, tape.reasoning
        else:
            content = reasoning = tape.plain
        for k in range(start, end):
            i = (off + k) & TAPE_MASK
            if k == stop_at or empty[i]:
                continue
            parts.append(head + (reasoning[i] if k < r_end else content[i]) + tail)

    def closing(self, completion: int, seq: EngineSequence) -> bytes:
        """The finish event, and the usage event when asked for; `[DONE]` is added by the caller."""
        out = self.out
        t = timings(seq, out.prompt_tokens, completion)
        u = usage(out.prompt_tokens, completion, t["cache_n"])
        common = {"created": out.created, "id": out.id, "model": orjson.loads(self.model)}
        fp = {"system_fingerprint": FINGERPRINT}
        if not self.chat:
            event = {
                "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": out.finish_reason}],
                "created": out.created,
                "model": common["model"],
                **fp,
                "object": "text_completion",
                "usage": u,
                "id": out.id,
                "timings": t,
            }
            return b"data: " + orjson.dumps(event) + b"\n\n"
        finish = {
            "choices": [{"finish_reason": out.finish_reason, "index": 0, "delta": {}}],
            **common,
            **fp,
            "object": "chat.completion.chunk",
        }
        if not self.include_usage:
            return b"data: " + orjson.dumps({**finish, "timings": t}) + b"\n\n"
        usage_event = {
            "choices": [],
            **common,
            **fp,
            "object": "chat.completion.chunk",
            "usage": u,
            "timings": t,
        }
        return b"data: " + orjson.dumps(finish) + b"\n\ndata: " + orjson.dumps(usage_event) + b"\n\n"

    def bad_chunk(self) -> bytes:
        """An event whose JSON is cut short (injected fault)."""
        return self.head + b'{"content":\n\n'

    @staticmethod
    def error_event(message: str, code: int = 500) -> bytes:
        return b"data: " + LlamaError(code, message, "server_error").body() + b"\n\n"


def full_body(
    tape: Tape, out: Output, model: str, endpoint: str, seq: EngineSequence, thinking: bool
) -> bytes:
    """The non-streaming answer, in llama-server's key order."""
    from swarm.sim.render import token_texts

    reasoning, content = token_texts(tape, out, out.target_tokens)
    t = timings(seq, out.prompt_tokens, out.target_tokens)
    u = usage(out.prompt_tokens, out.target_tokens, t["cache_n"])
    if endpoint == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking and reasoning:
            message["reasoning_content"] = reasoning
        choice: dict[str, Any] = {"finish_reason": out.finish_reason, "index": 0, "message": message}
        obj = "chat.completion"
    else:
        choice = {"text": content, "index": 0, "logprobs": None, "finish_reason": out.finish_reason}
        obj = "text_completion"
    return orjson.dumps(
        {
            "choices": [choice],
            "created": out.created,
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "object": obj,
            "usage": u,
            "id": out.id,
            "timings": t,
        }
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


# The chat template's special pieces, each one token when /tokenize parses special tokens
_SPECIAL = re.compile(r"(<\|im_start\|>)([^\n<]*)(\n)|(<\|im_end\|>)")


def apply_template(messages: list[dict[str, Any]]) -> str:
    """The chat prompt as text (the pseudo-template of swarm.core.tokens, ChatML-like)."""
    return "".join(chat_prompt_tokens(messages))


def template_pieces(text: str, parse_special: bool = True) -> list[str]:
    """Pseudo-tokens of `text`; with `parse_special` a template marker, and a role after
    `<|im_start|>`, are one token each, so a rendered chat counts what the chat request counts."""
    if not parse_special:
        return tokenize(text)
    pieces: list[str] = []
    pos = 0
    for m in _SPECIAL.finditer(text):
        pieces += tokenize(text[pos : m.start()])
        pieces += [g for g in m.groups() if g is not None]
        pos = m.end()
    return pieces + tokenize(text[pos:])


def tokenize_answer(body: dict[str, Any]) -> dict[str, Any]:
    """/tokenize: `{"tokens": [id, ...]}`, or `[{"id", "piece"}, ...]` with `with_pieces`."""
    content = body.get("content")
    if not isinstance(content, str):
        raise LlamaError(400, '"content" must be provided')
    pieces = template_pieces(content, body.get("parse_special", True) is not False)
    ids = piece_ids(pieces)
    if body.get("with_pieces") is True:
        return {"tokens": [{"id": i, "piece": p} for i, p in zip(ids, pieces, strict=True)]}
    return {"tokens": ids}


def detokenize_answer(body: dict[str, Any]) -> dict[str, Any]:
    """/detokenize: `{"tokens"}` -> `{"content"}` (ids that /tokenize answered)."""
    try:
        return {"content": detokenize_text(body.get("tokens"))}
    except ApiError as e:
        raise LlamaError(400, e.message) from None


class LlamaMetrics:
    """`llama-server --metrics`: its `llamacpp:` counters and gauges from the engine's state,
    written as llama-server writes them (HELP, TYPE, one unlabelled sample; names as given)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prompt_seconds = 0.0
        self.predicted_seconds = 0.0
        self.n_tokens_max = 0

    def counters(self, model: str) -> None:
        """No per-model tally: llama-server serves one model."""
        return None

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        sched, first, last = seq.scheduled_time, seq.first_token_time, seq.last_token_time
        if sched is not None and first is not None and last is not None:
            self.prompt_seconds += first - sched
            self.predicted_seconds += last - first
        self.n_tokens_max = max(self.n_tokens_max, seq.prompt_tokens + seq.generated)

    def families(self) -> list[tuple[str, str, str, float]]:
        """(name, type, help, value) in llama-server's order."""
        eng = self.engine
        c = eng.counters
        processed = c.prompt_tokens - c.prompt_cached
        return [
            (
                "prompt_tokens_total",
                "counter",
                "Number of prompt tokens processed, excluding cached tokens",
                processed,
            ),
            (
                "prompt_tokens_cached_total",
                "counter",
                "Number of prompt tokens reused from the cache",
                c.prompt_cached,
            ),
            ("prompt_seconds_total", "counter", "Total time spent processing prompts", self.prompt_seconds),
            (
                "tokens_predicted_total",
                "counter",
                "Number of generation tokens processed",
                c.generation_tokens,
            ),
            (
                "tokens_predicted_seconds_total",
                "counter",
                "Total time spent generating tokens",
                self.predicted_seconds,
            ),
            (
                "n_decode_total",
                "counter",
                "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
                c.steps,
            ),
            (
                "n_tokens_max",
                "counter",
                "Largest observed sequence length (prompt + generation)",
                self.n_tokens_max,
            ),
            ("spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated", 0),
            (
                "spec_decode_num_accepted_tokens_total",
                "counter",
                "Speculative: Total draft tokens accepted by the target model",
                0,
            ),
            (
                "spec_decode_num_drafts_total",
                "counter",
                "Speculative: Total speculative decoding verification steps",
                0,
            ),
            (
                "prompt_tokens_seconds",
                "gauge",
                "Average prompt throughput in tokens/s",
                processed / self.prompt_seconds if self.prompt_seconds else 0.0,
            ),
            (
                "predicted_tokens_seconds",
                "gauge",
                "Average generation throughput in tokens/s",
                c.generation_tokens / self.predicted_seconds if self.predicted_seconds else 0.0,
            ),
            ("requests_processing", "gauge", "Number of requests processing", len(eng.running)),
            ("requests_deferred", "gauge", "Number of requests deferred", len(eng.waiting)),
            (
                "n_busy_slots_per_decode",
                "gauge",
                "Average number of busy slots per llama_decode() call",
                c.step_seqs / c.steps if c.steps else 0.0,
            ),
        ]

    def render(self) -> bytes:
        lines = []
        for name, kind, doc, value in self.families():
            full = f"llamacpp:{name}"
            lines += [f"# HELP {full} {doc}", f"# TYPE {full} {kind}", f"{full} {value:g}"]
        return ("\n".join(lines) + "\n").encode()


__all__ = [
    "DONE",
    "NOT_FOUND_BODY",
    "SERVER",
    "LlamaError",
    "LlamaMetrics",
    "LlamaStreamRenderer",
    "apply_template",
    "detokenize_answer",
    "full_body",
    "load_body",
    "models_body",
    "parse_request",
    "tokenize_answer",
]
