"""swarm/sim/render.py: the SSE chunks the simulator streams, byte for byte as vLLM lays them out."""

from __future__ import annotations

import orjson
import pytest

from swarm.sim.render import TAPE_MASK, Output, StreamRenderer, Tape


def _events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return [e[len(b"data: ") :] for e in raw.split(b"\n\n") if e]


def test_stream_chunks_have_vllm_layout_and_exact_running_usage():
    tape = Tape.build(0, 0.3, "reasoning")
    out = Output("chatcmpl-x", 1700000000, 12, 10, 4, "stop", 5)
    r = StreamRenderer(tape, out, "m", "chat", continuous=True, merge=False)
    parts = [r.role_chunk()]
    r.tokens(0, 10, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["usage"]["completion_tokens"] for c in chunks] == list(range(11))
    assert all(set(c["choices"][0]["delta"]) == {"reasoning"} for c in chunks[1:5])
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in chunks[5:])
    assert (
        chunks[-1]["choices"][0]["finish_reason"] == "stop"
        and chunks[-1]["choices"][0]["delta"]["content"] == ""
    )
    assert "stop_reason" not in chunks[1]["choices"][0] and chunks[-1]["choices"][0]["stop_reason"] is None
    assert all(c["usage"]["total_tokens"] == 12 + c["usage"]["completion_tokens"] for c in chunks)


def test_merge_holds_back_empty_tokens_but_usage_stays_exact():
    tape = Tape.build(0, 0.5, "reasoning_content")
    empties = sum(tape.empty[k & TAPE_MASK] for k in range(0, 99))
    out = Output("chatcmpl-x", 1, 5, 100, 60, "length", 0)
    r = StreamRenderer(tape, out, "m", "chat", continuous=True, merge=True)
    parts: list[bytes] = []
    r.tokens(0, 100, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert len(chunks) == 100 - empties  # the last token always gets its (finish) chunk
    usage = [c["usage"]["completion_tokens"] for c in chunks]
    assert usage == sorted(usage) and usage[-1] == 100
    assert all(next(iter(c["choices"][0]["delta"].values()), "x") != "" for c in chunks[:-1])
    assert "reasoning_content" in chunks[0]["choices"][0]["delta"]


def test_completion_chunks_and_bad_chunk():
    tape = Tape.build(0, 0.0, "reasoning")
    out = Output("cmpl-x", 1, 3, 3, 0, "length", 0)
    r = StreamRenderer(tape, out, "m", "completions", continuous=False, merge=False)
    parts: list[bytes] = []
    r.tokens(0, 3, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert [c["object"] for c in chunks] == ["text_completion"] * 3
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]
    assert all("stop_reason" in c["choices"][0] and "usage" not in c for c in chunks)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(_events(r.bad_chunk())[0])
