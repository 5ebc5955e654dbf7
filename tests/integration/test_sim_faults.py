"""Every injected fault, over real HTTP, checked against the trace line that names it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from swarm.sim.faults import FAULT_KINDS, HTTP_FAULTS
from tests.helpers.sim_http import call, chat_body, metric, read_trace, scrape, token_chunks
from tests.helpers.support import sim_server

pytestmark = pytest.mark.integration

STALL_S = 0.3
TOKENS = 20


def _parse_events(raw: bytes) -> list[bytes]:
    return [e[6:] for e in raw.split(b"\n\n") if e]


def _check_stream(r, fault: str | None, trace: dict) -> None:
    assert trace["fault"] == fault
    if fault in HTTP_FAULTS:
        status, err_type = HTTP_FAULTS[fault]
        assert r.status == status == trace["status"]
        assert r.json() == {
            "error": {
                "message": f"Simulated fault ({fault}).",
                "type": err_type,
                "param": None,
                "code": status,
            }
        }
        assert trace["first_token_time"] is None and trace["completion_tokens"] == 0
        return
    assert r.status == 200 and trace["status"] == 200
    events = _parse_events(r.raw)
    if fault == "cut":
        assert not r.complete and b"[DONE]" not in events  # the chunked body never ends
        chunks = [json.loads(e) for e in events]
        assert 1 <= len(token_chunks(chunks)) == trace["completion_tokens"] < TOKENS
        assert trace["finish_reason"] is None
        return
    assert r.complete and events[-1] == b"[DONE]"
    if fault == "stream_error":
        err = json.loads(events[-2])
        assert (
            set(err) == {"error"}
            and err["error"]["code"] == 500
            and err["error"]["type"] == "InternalServerError"
        )
        chunks = [json.loads(e) for e in events[:-2]]
        assert 1 <= len(token_chunks(chunks)) == trace["completion_tokens"] < TOKENS
        assert trace["finish_reason"] is None
        return
    if fault == "bad_chunk":
        bad = []
        for e in events[:-1]:
            try:
                json.loads(e)
            except json.JSONDecodeError:
                bad.append(e)
        assert len(bad) == 1
        events = [e for e in events if e not in bad]
    chunks = [json.loads(e) for e in events[:-1]]
    assert (
        len(token_chunks(chunks))
        == TOKENS
        == chunks[-1]["usage"]["completion_tokens"]
        == trace["completion_tokens"]
    )
    assert trace["finish_reason"] == "length"
    if fault == "stall":
        assert r.elapsed >= STALL_S
        assert trace["last_token_time"] - trace["first_token_time"] >= STALL_S - 0.01


def _check_whole(r, fault: str | None, trace: dict) -> None:
    assert trace["fault"] == fault and trace["stream"] is False
    if fault in HTTP_FAULTS:
        assert r.status == HTTP_FAULTS[fault][0] == trace["status"]
    elif fault == "cut":
        assert r.status == 0 and trace["status"] is None  # connection closed, nothing sent
    elif fault == "stream_error":
        assert r.status == 500 == trace["status"] and r.json()["error"]["type"] == "InternalServerError"
    elif fault == "bad_chunk":
        assert r.status == 200
        with pytest.raises(json.JSONDecodeError):
            r.json()
    else:
        assert r.status == 200 and r.json()["usage"]["completion_tokens"] == TOKENS
        if fault == "stall":
            assert r.elapsed >= STALL_S


def test_every_fault_has_its_exact_shape(tmp_path):
    faults = [arg for kind in FAULT_KINDS for arg in ("--fault", f"{kind}=0.1")]  # 80% of requests faulted
    with sim_server(tmp_path, *faults, "--stall", f"{STALL_S * 1e3:g}ms", "--seed", "7") as s:
        before = scrape(s.url)
        stream = [call(s.url, "/v1/chat/completions", chat_body(TOKENS, ignore_eos=True)) for _ in range(90)]
        whole = [
            call(s.url, "/v1/chat/completions", chat_body(TOKENS, stream=False, ignore_eos=True))
            for _ in range(40)
        ]
        after = scrape(s.url)
        ids = [r.rid for r in stream + [w for w in whole if w.status]]
        trace = read_trace(s.trace, ids)
        lines = [json.loads(x) for x in s.trace.read_text().splitlines()]
    seen = Counter()
    for r in stream:
        _check_stream(r, trace[r.rid]["fault"], trace[r.rid])
        seen[trace[r.rid]["fault"]] += 1
    whole_lines = [rec for rec in lines if rec["stream"] is False]
    assert len(whole_lines) == len(whole)
    for r, rec in zip(whole, whole_lines, strict=True):  # requests were sequential: same order
        if r.status:
            assert rec["id"] == r.rid
        _check_whole(r, rec["fault"], rec)
        seen[rec["fault"]] += 1
    assert set(seen) == {None, *FAULT_KINDS}, seen  # every kind happened
    assert 0.08 < seen[None] / 130 < 0.35
    ok = seen[None] + 0  # faulted requests never count as successes
    succ = sum(
        metric(after, "vllm:request_success_total", finished_reason=f)
        - metric(before, "vllm:request_success_total", finished_reason=f)
        for f in ("stop", "length")
    )
    assert succ == ok
    assert metric(after, "vllm:num_requests_running") == 0 and metric(after, "vllm:kv_cache_usage_perc") == 0
