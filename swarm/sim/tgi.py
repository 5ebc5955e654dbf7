"""The simulator speaking as text-generation-inference (`swarm sim --server tgi`): requests,
errors, /v1/models, /info and the stream, from TGI v3.3.7's router (huggingface/
text-generation-inference at db931fcf; `router/src/server.rs`, `lib.rs`, `chat.rs`,
`infer/mod.rs`; docs/server-families.md).

- errors: `{"error": "<message>", "error_type": "<kind>"}`, a string; a request that fails
  validation is a 422 (`InferError::ValidationError`), an overload a 429; an error inside a
  stream is `{"error": {"message", "http_status_code": 422}}` (`into_openai_event`).
- the model a request names is not checked: TGI serves one model and answers in the name asked
  for (`model_id`: the request's, or its own when the request names none or "tgi").
- chat stream: no role chunk; every token is one chunk whose delta is
  `{"role": "assistant", "content": "..."}` (reasoning stays inside `content`), the last token's
  chunk carries `finish_reason`; `"id": ""` and `"usage": null` on every chunk; usage only with
  `stream_options.include_usage`, as one more chunk with `"choices": []`. Completions stream:
  `finish_reason` "" on every chunk but the last, whose reason is TGI's own ("eos_token",
  "length") and which always carries usage.
- /v1/models: one model whose `owned_by` is the model id; /info: the router's `Info`.
"""

from __future__ import annotations

from typing import Any

import orjson

from swarm.sim.protocol import ApiError, GenRequest, load_body, parse_chat, parse_completion
from swarm.sim.render import TAPE_MASK, Output, Tape, token_texts, usage_object

VERSION = "3.3.7"
FINGERPRINT = f"{VERSION}-native"  # server.rs: "{version}-{docker_label or native}"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class TgiError(ApiError):
    """TGI's `ErrorResponse`: the message as a string and its kind beside it."""

    def body(self) -> bytes:
        return orjson.dumps({"error": self.message, "error_type": self.type})


def parse(
    raw: bytes, endpoint: str, served: str, max_model_len: int
) -> tuple[dict[str, Any], str, GenRequest]:
    """(body, the model name answered, the request); any refusal is TGI's 422 validation error."""
    try:
        body = load_body(raw)
        req = parse_chat(body, max_model_len) if endpoint == "chat" else parse_completion(body, max_model_len)
    except ApiError as e:
        raise TgiError(422, f"Input validation error: {e.message}", "validation") from None
    model = body.get("model")
    named = model if isinstance(model, str) and model not in ("", "tgi") else served
    return body, named, req


def error(status: int, message: str) -> TgiError:
    """An injected HTTP fault in TGI's words (`InferError::error_type`)."""
    kinds = {422: "validation", 429: "overloaded", 424: "generation"}
    return TgiError(status, message, kinds.get(status, "validation" if status < 500 else "generation"))


def failure_kind(status: int) -> str:
    """The `tgi_request_failure{err}` a refused request counts under."""
    return {429: "overloaded"}.get(status, "validation" if status < 500 else "generation")


def models_body(model: str) -> dict[str, Any]:
    """`openai_get_model_info`: one model, `owned_by` its own id, `created` 0 (a TODO in server.rs)."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": model}]}


def info_body(model: str, max_concurrent: int, max_model_len: int) -> dict[str, Any]:
    """`GET /info` (`Info`): `max_concurrent_requests` is the sequence cap."""
    return {
        "model_id": model,
        "model_sha": None,
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": max_concurrent,
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": max_model_len - 1,
        "max_total_tokens": max_model_len,
        "validation_workers": 2,
        "max_client_batch_size": 4,
        "router": "text-generation-router",
        "version": VERSION,
        "sha": None,
        "docker_label": None,
    }


class TgiStreamRenderer:
    """TGI's SSE events for one request (the calls of swarm.sim.render.StreamRenderer)."""

    def __init__(self, tape: Tape, out: Output, model: str, endpoint: str, include_usage: bool) -> None:
        self.tape, self.out, self.include_usage = tape, out, include_usage
        self.chat = endpoint == "chat"
        m = orjson.dumps(model)
        fp = FINGERPRINT.encode()
        if self.chat:
            self.head = (
                b'data: {"object":"chat.completion.chunk","id":"","created":%d,"model":%s,'
                % (
                    out.created,
                    m,
                )
                + b'"system_fingerprint":"%s","choices":[{"index":0,"delta":{"role":"assistant","content":'
                % fp
            )
            self.tail = b'},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
            reason = out.finish_reason.encode()
            self.final_tail = b'},"logprobs":null,"finish_reason":"%s"}],"usage":null}\n\n' % reason
        else:
            self.head = (
                b'data: {"object":"text_completion","id":"","created":%d,"choices":[{"index":0,"text":'
                % (out.created)
            )
            self.tail = b',"logprobs":null,"finish_reason":""}],"model":%s,"system_fingerprint":"%s"}\n\n' % (
                m,
                fp,
            )
            self.model, self.fp = m, fp

    def role_chunk(self) -> bytes:
        """None: every chat chunk names the role itself."""
        return b""

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        """One event per token; the last token's event ends the answer (completions: in `closing`)."""
        tape, out = self.tape, self.out
        off, last = out.offset, out.target_tokens - 1
        head, tail, plain = self.head, self.tail, tape.plain
        eos = out.finish_reason == "stop"
        for k in range(start, min(end, last)):
            parts.append(head + plain[(off + k) & TAPE_MASK] + tail)
        if end > last >= start and self.chat:
            text = b'""' if eos else plain[(off + last) & TAPE_MASK]  # EOS is a special token: no text
            parts.append(head + text + self.final_tail)

    def closing(self, completion: int, seq: object = None) -> bytes:
        out = self.out
        if not self.chat:  # Completion::Final: the last token, TGI's finish reason, the usage
            text = (
                b'""'
                if out.finish_reason == "stop"
                else self.tape.plain[(out.offset + completion - 1) & TAPE_MASK]
            )
            reason = b"eos_token" if out.finish_reason == "stop" else b"length"
            return (
                b'data: {"object":"text_completion","id":"","created":%d,"model":%s,"system_fingerprint":"%s",'
                % (out.created, self.model, self.fp)
                + b'"choices":[{"index":0,"text":'
                + text
                + b',"logprobs":null,"finish_reason":"%s"}],"usage":' % reason
                + usage_object(out.prompt_tokens, completion)
                + b"}\n\n"
            )
        if not self.include_usage:
            return b""
        head = self.head[: self.head.index(b'"choices"')]
        return head + b'"choices":[],"usage":' + usage_object(out.prompt_tokens, completion) + b"}\n\n"

    def bad_chunk(self) -> bytes:
        """An event whose JSON is cut short (injected fault)."""
        return self.head + b'"\n\n'

    @staticmethod
    def error_event(message: str, code: int = 422) -> bytes:
        return b"data: " + orjson.dumps({"error": {"message": message, "http_status_code": 422}}) + b"\n\n"


def full_body(tape: Tape, out: Output, model: str, endpoint: str) -> bytes:
    """The non-streamed answer (`ChatCompletion` / `CompletionFinal`), reasoning inside the text."""
    reasoning, content = token_texts(tape, out, out.target_tokens)
    usage = {
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.target_tokens,
        "total_tokens": out.prompt_tokens + out.target_tokens,
    }
    common = {"id": "", "created": out.created, "model": model, "system_fingerprint": FINGERPRINT}
    if endpoint == "chat":
        message = {"role": "assistant", "content": reasoning + content}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": out.finish_reason}
        return orjson.dumps({"object": "chat.completion", **common, "choices": [choice], "usage": usage})
    reason = "eos_token" if out.finish_reason == "stop" else "length"
    choice = {"index": 0, "text": reasoning + content, "logprobs": None, "finish_reason": reason}
    return orjson.dumps({"object": "text_completion", **common, "choices": [choice], "usage": usage})
