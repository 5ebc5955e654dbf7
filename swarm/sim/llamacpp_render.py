"""llama-server's answers (`swarm sim --server llamacpp`): stream events and the full body.

- stream events: `{"choices":[...],"created","id","model","system_fingerprint","object"}` with
  a role event whose `content` is null (missing when the first token ends inside a UTF-8
  character, as with llama-server), one event per token except that a token ending inside a
  UTF-8 character is held and sent with the next (several tokens per event), a finish event with
  `delta: {}`, and llama.cpp's `timings`: on the finish event without `include_usage`, on a
  `choices: []` usage event with it. Completions put usage and timings on their last event.
- usage carries `prompt_tokens_details.cached_tokens` (= timings.cache_n, the prefix-cache hit).

Held to a real llama-server by tests/e2e/test_llamacpp_conformance.py; the requests and errors
of this face: swarm/sim/llamacpp.py.
"""

from __future__ import annotations

from typing import Any

import orjson

from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.llamacpp import FINGERPRINT, LlamaError
from swarm.sim.render import TAPE_MASK, Output, Tape
from swarm.sim.tool_calls import token_chunks


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


class LlamaToolStreamRenderer(LlamaStreamRenderer):
    """llama-server's events of an answer of tool calls (chat): one `tool_calls` diff a token, in
    its key order (swarm/sim/tool_calls.py), then the finish event as any answer's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert self.out.tool_plan is not None
        self.deltas = token_chunks(self.out.tool_plan, llamacpp=True)

    def role_chunk(self) -> bytes:
        return self.head + b'{"role":"assistant","content":null}' + self.tail

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        head, tail, deltas = self.head, self.tail, self.deltas
        parts.extend(head + deltas[k] + tail for k in range(start, end))


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
