"""swarm/sim/tgi.py: TGI's requests, errors, listings and stream, held to text-generation-inference
v3.3.7's router (`router/src/lib.rs`: ChatCompletionChunk, ErrorResponse, ModelInfo, Info;
`chat.rs`: the chunks and the usage chunk; `server.rs`: completions' Chunk/CompletionFinal)."""

from __future__ import annotations

import json

import pytest

from swarm.sim import tgi
from swarm.sim.render import Output, Tape


def _events(data: bytes) -> list[dict]:
    return [json.loads(e[6:]) for e in data.split(b"\n\n") if e]


def _stream(endpoint: str, include_usage: bool, finish: str = "stop", n: int = 4) -> list[dict]:
    tape = Tape.build(0, 0.0, "reasoning_content")
    out = Output("chatcmpl-x", 7, 11, n, 1, finish, 5)
    r = tgi.TgiStreamRenderer(tape, out, "org/model", endpoint, include_usage)
    parts: list[bytes] = [r.role_chunk()]
    r.tokens(0, 2, parts)
    r.tokens(2, n, parts)
    parts.append(r.closing(n))
    return _events(b"".join(parts))


def test_a_chat_stream_is_tgi_s_chunks_with_usage_only_when_asked():
    chunks = _stream("chat", include_usage=True)
    assert len(chunks) == 5  # no role chunk: four tokens, one usage chunk
    for c in chunks[:4]:
        assert list(c) == ["object", "id", "created", "model", "system_fingerprint", "choices", "usage"]
        assert c["id"] == "" and c["usage"] is None and c["object"] == "chat.completion.chunk"
        assert c["choices"][0]["delta"]["role"] == "assistant"  # reasoning stays in content
    assert [c["choices"][0]["finish_reason"] for c in chunks[:4]] == [None, None, None, "stop"]
    assert chunks[3]["choices"][0]["delta"]["content"] == ""  # EOS is special: no text
    assert chunks[4]["choices"] == [] and chunks[4]["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 4,
        "total_tokens": 15,
    }
    assert len(_stream("chat", include_usage=False)) == 4


def test_a_completions_stream_ends_with_tgi_s_reason_and_usage_always():
    chunks = _stream("completions", include_usage=False, finish="length")
    assert [c["choices"][0]["finish_reason"] for c in chunks] == ["", "", "", "length"]
    assert chunks[-1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    assert _stream("completions", include_usage=False)[-1]["choices"][0]["finish_reason"] == "eos_token"


def test_errors_listing_and_info_are_tgi_s_shapes():
    with pytest.raises(tgi.TgiError) as e:
        tgi.parse(b'{"messages": []}', "chat", "m", 512)
    assert e.value.status == 422 and json.loads(e.value.body())["error_type"] == "validation"
    assert isinstance(json.loads(e.value.body())["error"], str)
    assert tgi.error(429, "x").body() == b'{"error":"x","error_type":"overloaded"}'
    _, model, req = tgi.parse(
        b'{"model": "tgi", "messages": [{"role": "user", "content": "hi"}]}', "chat", "m", 512
    )
    assert model == "m" and req.prompt_tokens > 0  # "tgi" names its own model; any other name is echoed
    assert tgi.parse(b'{"model": "x", "prompt": "hi"}', "completions", "m", 512)[1] == "x"
    assert tgi.models_body("org/m")["data"] == [
        {"id": "org/m", "object": "model", "created": 0, "owned_by": "org/m"}
    ]
    assert tgi.info_body("org/m", 64, 512)["max_concurrent_requests"] == 64
    assert json.loads(tgi.TgiStreamRenderer.error_event("boom")[6:]) == {
        "error": {"message": "boom", "http_status_code": 422}
    }


def test_the_whole_body_carries_reasoning_inside_content():
    tape = Tape.build(0, 0.0, "reasoning_content")
    body = json.loads(tgi.full_body(tape, Output("i", 7, 11, 4, 2, "length", 5), "m", "chat"))
    assert body["object"] == "chat.completion" and body["id"] == ""
    assert body["choices"][0]["message"]["content"] == "".join(tape.text[5:9])
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
