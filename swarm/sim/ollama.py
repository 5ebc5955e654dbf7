"""The simulator speaking as Ollama's OpenAI-compatible API (`swarm sim --server ollama`), from
ollama/ollama at fb307609 (`openai/openai.go`, `middleware/openai.go`, `server/routes.go`;
docs/server-families.md).

- no /metrics (Ollama has no Prometheus code): a 404 as gin answers an unknown path, so the
  server side is not observable; `GET /` answers "Ollama is running", `GET /api/version` the version.
- errors: `{"error": {"message", "type", "param": null, "code": null}}` (`NewError`: 400
  `invalid_request_error`, 404 `not_found_error`, else `api_error`); an unknown model is a 404
  `model "NAME" not found, try pulling it first`.
- chat stream: the first chunk carries `role`; reasoning arrives in `delta.reasoning` (with
  `"content": ""`); a token ending inside a UTF-8 character is held and goes with the next (the
  runner sends whole characters); the EOS sends nothing; `finish_reason` comes in its own chunk
  with `delta: {}`; usage only with `stream_options.include_usage`, as one more chunk with
  `"choices": []`. Completions: each chunk carries a zero usage when it is asked for, the real
  one comes in a last `"choices": []` chunk. Ids start `chatcmpl-` / `cmpl-` (Ollama then writes a
  number below 999; the simulator its own hex id, which the trace keeps).
"""

from __future__ import annotations

from typing import Any

import orjson

from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.protocol import ApiError, GenRequest, load_body, parse_chat, parse_completion
from swarm.sim.render import TAPE_MASK, Output, Tape, token_texts, usage_object

VERSION = "0.33.0-rc2"
FINGERPRINT = "fp_ollama"
NOT_FOUND = b"404 page not found"  # gin's answer to an unknown route (text/plain)
SSE_HEADERS = {"Content-Type": "text/event-stream"}
OWNER = "library"  # model.ParseName(id).Namespace of an official model


class OllamaError(ApiError):
    """`openai.NewError`: the OpenAI error object, its type named by the status."""

    def body(self) -> bytes:
        kind = {400: "invalid_request_error", 404: "not_found_error"}.get(self.status, "api_error")
        return orjson.dumps({"error": {"message": self.message, "type": kind, "param": None, "code": None}})


def parse(
    raw: bytes, endpoint: str, served: str, max_model_len: int
) -> tuple[dict[str, Any], str, GenRequest]:
    """(body, the model, the request); an unknown model is Ollama's 404, any other refusal a 400."""
    try:
        body = load_body(raw)
        req = parse_chat(body, max_model_len) if endpoint == "chat" else parse_completion(body, max_model_len)
    except ApiError as e:
        raise OllamaError(400, e.message) from None
    model = body.get("model")
    if model != served:
        raise OllamaError(404, f"model {orjson.dumps(model).decode()} not found, try pulling it first")
    return body, served, req


def models_body(model: str, created: int) -> dict[str, Any]:
    """`ToListCompletion`: `owned_by` is the name's namespace, "library" for an official model."""
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": created, "owned_by": OWNER}],
    }


class NoMetrics:
    """Ollama has no /metrics: nothing is counted, nothing is served."""

    def counters(self, model: str) -> None:
        return None

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        return None

    def render(self) -> bytes:
        raise LookupError("Ollama serves no /metrics")


class OllamaStreamRenderer:
    """Ollama's SSE events for one request (the calls of swarm.sim.render.StreamRenderer)."""

    def __init__(
        self, tape: Tape, out: Output, model: str, endpoint: str, include_usage: bool, reasoning_field: str
    ) -> None:
        self.tape, self.out, self.include_usage = tape, out, include_usage
        self.chat = endpoint == "chat"
        self.opened = False  # the role went out (chat) on the first chunk
        m = orjson.dumps(model)
        self.reasoning_key = reasoning_field.encode()
        if self.chat:
            self.prefix = (
                b'data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":%s,'
                % (
                    out.id.encode(),
                    out.created,
                    m,
                )
                + b'"system_fingerprint":"%s","choices":' % FINGERPRINT.encode()
            )
            self.tail = b',"finish_reason":null}]}\n\n'
        else:
            self.prefix = b'data: {"id":"%s","object":"text_completion","created":%d,"choices":' % (
                out.id.encode(),
                out.created,
            )
            zero = b',"usage":' + usage_object(0, 0) if include_usage else b""
            self.tail = b',"index":0,"finish_reason":null}],"model":%s,"system_fingerprint":"%s"%s}\n\n' % (
                m,
                FINGERPRINT.encode(),
                zero,
            )
            self.model_tail = b'"model":%s,"system_fingerprint":"%s"' % (m, FINGERPRINT.encode())

    def role_chunk(self) -> bytes:
        """None of its own: the role rides on the first chunk with text."""
        return b""

    def _delta(self, k: int, i: int) -> bytes:
        role = b"" if self.opened else b'"role":"assistant",'
        self.opened = True
        text = self.tape.plain[i]
        if k < self.out.reasoning_tokens:
            return b'{%s"content":"","%s":%s}' % (role, self.reasoning_key, text)
        return b'{%s"content":%s}' % (role, text)

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        tape, out = self.tape, self.out
        off = out.offset
        stop_at = out.target_tokens - 1 if out.finish_reason == "stop" else -1
        empty, plain = tape.empty, tape.plain
        for k in range(start, end):
            i = (off + k) & TAPE_MASK
            if k == stop_at or empty[i]:
                continue
            if self.chat:
                parts.append(self.prefix + b'[{"index":0,"delta":' + self._delta(k, i) + self.tail)
            else:
                parts.append(self.prefix + b'[{"text":' + plain[i] + self.tail)

    def closing(self, completion: int, seq: object = None) -> bytes:
        out = self.out
        usage = usage_object(out.prompt_tokens, completion)
        reason = out.finish_reason.encode()
        if not self.chat:
            done = self.prefix + b'[{"text":"","index":0,"finish_reason":"%s"}],' % reason + self.model_tail
            done += b',"usage":' + usage_object(0, 0) + b"}\n\n" if self.include_usage else b"}\n\n"
            if self.include_usage:
                done += self.prefix + b"[]," + self.model_tail + b',"usage":' + usage + b"}\n\n"
            return done
        opening = b""
        if not self.opened:  # a wholly empty answer still opens with a role chunk
            opening = self.prefix + b'[{"index":0,"delta":{"role":"assistant","content":""}' + self.tail
        finish = self.prefix + b'[{"index":0,"delta":{},"finish_reason":"%s"}]}\n\n' % reason
        if self.include_usage:
            finish += self.prefix + b'[],"usage":' + usage + b"}\n\n"
        return opening + finish

    def bad_chunk(self) -> bytes:
        """An event whose JSON is cut short (injected fault)."""
        return self.prefix + b'[{"index":0,"delta":{"content":\n\n'

    @staticmethod
    def error_event(message: str, code: int = 500) -> bytes:
        return b"data: " + OllamaError(code, message).body() + b"\n\n"


def full_body(tape: Tape, out: Output, model: str, endpoint: str, created: int) -> bytes:
    """The non-streamed answer (`ToChatCompletion` / `ToCompletion`)."""
    reasoning, content = token_texts(tape, out, out.target_tokens)
    usage = {
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.target_tokens,
        "total_tokens": out.prompt_tokens + out.target_tokens,
    }
    head = {"id": out.id, "object": "chat.completion" if endpoint == "chat" else "text_completion"}
    common = {**head, "created": created, "model": model, "system_fingerprint": FINGERPRINT}
    if endpoint == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning"] = reasoning
        choice = {"index": 0, "message": message, "finish_reason": out.finish_reason}
    else:
        choice = {"text": content, "index": 0, "finish_reason": out.finish_reason}
    return orjson.dumps({**common, "choices": [choice], "usage": usage})
