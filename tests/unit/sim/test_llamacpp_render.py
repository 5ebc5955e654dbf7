"""swarm/sim/llamacpp_render.py: llama-server's stream events and full body, timings and usage."""

from __future__ import annotations

import orjson
import pytest

from swarm.sim.engine import Sequence
from swarm.sim.llamacpp_render import LlamaStreamRenderer, full_body, timings, usage
from swarm.sim.render import TAPE_MASK, Output, Tape


def _events(raw: bytes) -> list[dict]:
    assert raw.endswith(b"\n\n")
    return [orjson.loads(e[len(b"data: ") :]) for e in raw.split(b"\n\n") if e]


def _seq(prompt: int = 12, cached: int = 4) -> Sequence:
    s = Sequence("r", prompt, 10, arrival_time=100.0, cached_tokens=cached)
    s.scheduled_time, s.first_token_time, s.last_token_time = 100.5, 101.0, 102.0
    return s


def test_timings_from_the_engines_timestamps():
    t = timings(_seq(), 12, 10)
    assert t["cache_n"] == 4 and t["prompt_n"] == 8 and t["predicted_n"] == 10
    assert t["prompt_ms"] == pytest.approx(500.0) and t["predicted_ms"] == pytest.approx(1000.0)
    assert t["prompt_per_second"] == pytest.approx(16.0) and t["predicted_per_token_ms"] == pytest.approx(
        100.0
    )
    idle = Sequence(
        "r", 3, 0, arrival_time=5.0
    )  # never scheduled: every span 0, its rates 0 as llama.cpp writes them
    zero = timings(idle, 3, 0)
    assert (
        zero["prompt_ms"] == 0.0
        and zero["prompt_per_second"] == 0.0
        and zero["predicted_per_token_ms"] == 0.0
    )
    assert usage(12, 10, 40) == {
        "completion_tokens": 10,
        "prompt_tokens": 12,
        "total_tokens": 22,
        "prompt_tokens_details": {"cached_tokens": 12},  # the hit never exceeds the prompt
    }


def test_chat_stream_events_in_llama_servers_shape():
    tape = Tape.build(0, 0.0, "reasoning_content")
    out = Output("chatcmpl-x", 1700000000, 12, 5, 0, "length", 0)
    r = LlamaStreamRenderer(tape, out, "m", "chat", include_usage=False)
    parts = [r.role_chunk()]
    r.tokens(0, 5, parts)
    parts.append(r.closing(5, _seq()))
    events = _events(b"".join(parts))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert list(events[1]) == ["choices", "created", "id", "model", "system_fingerprint", "object"]
    assert len(events) == 1 + 5 + 1
    finish = events[-1]
    assert finish["choices"][0] == {"finish_reason": "length", "index": 0, "delta": {}}
    assert finish["timings"]["predicted_n"] == 5 and "usage" not in finish


def test_include_usage_puts_usage_and_timings_on_their_own_event():
    tape = Tape.build(0, 0.0, "reasoning_content")
    out = Output("chatcmpl-x", 1, 12, 3, 0, "stop", 0)
    r = LlamaStreamRenderer(tape, out, "m", "chat", include_usage=True)
    parts: list[bytes] = []
    r.tokens(0, 3, parts)
    assert len(parts) == 2  # the EOS token of a stop sends nothing
    finish, last = _events(r.closing(3, _seq()))
    assert "timings" not in finish and finish["choices"][0]["finish_reason"] == "stop"
    assert last["choices"] == [] and last["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}


def test_a_token_cut_inside_a_utf8_character_goes_with_the_next():
    tape = Tape.build(0, 0.5, "reasoning_content")
    out = Output("chatcmpl-x", 1, 5, 100, 0, "length", 0)
    r = LlamaStreamRenderer(tape, out, "m", "chat", include_usage=False)
    parts: list[bytes] = []
    r.tokens(0, 100, parts)
    assert len(parts) == 100 - sum(tape.empty[k & TAPE_MASK] for k in range(100))
    assert (r.role_chunk() == b"") == tape.empty[0]


def test_completions_carry_usage_and_timings_on_their_last_event():
    tape = Tape.build(0, 0.0, "reasoning_content")
    out = Output("cmpl-x", 1, 7, 2, 0, "length", 0)
    r = LlamaStreamRenderer(tape, out, "m", "completions", include_usage=False)
    parts: list[bytes] = []
    r.tokens(0, 2, parts)
    events = _events(b"".join(parts) + r.closing(2, _seq(prompt=7)))
    assert [e["object"] for e in events] == ["text_completion"] * 3
    assert events[-1]["usage"]["total_tokens"] == 9 and events[-1]["timings"]["cache_n"] == 4
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(r.bad_chunk()[len(b"data: ") :])
    err = orjson.loads(LlamaStreamRenderer.error_event("boom")[len(b"data: ") :])
    assert err == {"error": {"code": 500, "message": "boom", "type": "server_error"}}


def test_full_body_in_llama_servers_key_order():
    tape = Tape.build(0, 0.0, "reasoning_content")
    out = Output("chatcmpl-x", 1, 12, 6, 2, "length", 0)
    body = orjson.loads(full_body(tape, out, "m", "chat", _seq(), thinking=True))
    assert list(body) == [
        "choices",
        "created",
        "model",
        "system_fingerprint",
        "object",
        "usage",
        "id",
        "timings",
    ]
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and message["reasoning_content"]
    plain = orjson.loads(full_body(tape, out, "m", "chat", _seq(), thinking=False))
    assert "reasoning_content" not in plain["choices"][0]["message"]
    text = orjson.loads(full_body(tape, out, "m", "completions", _seq(), thinking=False))
    assert text["object"] == "text_completion" and isinstance(text["choices"][0]["text"], str)
