"""summary.json's failure side, from the fault matrix (issue 8): the first distinct error messages
kept per outcome and merged across workers, and when the target went away. The fault matrix
itself runs real processes: tests/integration/test_faults.py."""

from __future__ import annotations

import json

import pytest

from swarm.core.records import Outcome, RequestRecord
from swarm.stats import summary as summary_mod
from swarm.stats.aggregate import ERROR_MESSAGES_MAX, Aggregate


def _rec(
    outcome: Outcome,
    error: str | None,
    t0: float,
    e2e: float = 0.01,
    status: int | None = 200,
    workload: str = "chat",
) -> RequestRecord:
    return RequestRecord(
        workload=workload, start_wall_s=t0, outcome=outcome, error=error, e2e_s=e2e, http_status=status
    )


def test_summary_keeps_the_first_distinct_error_messages_not_one_per_request():
    """Pure: messages capped per outcome, counted, merged across workers as if one process saw all."""
    records = [
        _rec(Outcome.HTTP_ERROR, "429 Simulated fault (http_429).", 100 + i, status=429) for i in range(500)
    ]
    records += [
        _rec(Outcome.HTTP_ERROR, f"400 prompt of {i} tokens is too long", 200 + i, status=400)
        for i in range(50)
    ]  # distinct per request (real vLLM messages carry numbers)
    records += [_rec(Outcome.TIMEOUT, "no byte for 60 s (streaming)", 300.0)] * 3
    records += [_rec(Outcome.OK, None, 400.0)] * 7
    one = Aggregate()
    for r in records:
        one.add(r)
    workers = [Aggregate(), Aggregate(), Aggregate()]
    for i, r in enumerate(records):
        workers[i % 3].add(r)
    master = Aggregate()
    for w in workers:  # over the wire, as report_to_master does
        master.merge(Aggregate.from_wire(w.take_delta().to_wire()))
    for agg in (one, master):
        s = summary_mod.build(agg, run_id="r", start_s=0.0, end_s=500.0)
        assert set(s["errors"]) == {"http_error", "timeout"}
        kept = s["errors"]["http_error"]
        assert len(kept) == ERROR_MESSAGES_MAX
        assert kept[0] == {"message": "429 Simulated fault (http_429).", "count": 500}
        assert sum(e["count"] for e in kept) <= s["total"]["failures"]["http_error"] == 550
        assert s["errors"]["timeout"] == [{"message": "no byte for 60 s (streaming)", "count": 3}]
        assert s["target_unreachable_since"] is None
    json.dumps(s, allow_nan=False)


def test_summary_says_when_the_target_went_away():
    ok = [_rec(Outcome.OK, None, 10.0 + i, e2e=1.0) for i in range(10)]  # last response ends at 20
    blip = [_rec(Outcome.CONNECT_ERROR, "ConnectionRefusedError", 5.0, e2e=0.001, status=None)]
    cut = [_rec(Outcome.TRUNCATED, "connection closed without [DONE]", 19.5, e2e=0.7)]  # ends 20.2
    dead = [
        _rec(Outcome.CONNECT_ERROR, "ConnectionRefusedError", 20.3 + i, e2e=0.001, status=None)
        for i in range(5)
    ]

    def since(records):
        agg = Aggregate()
        for r in records:
            agg.add(r)
        return summary_mod.build(agg, run_id="r", start_s=0.0, end_s=30.0)["target_unreachable_since_s"]

    assert since(ok) is None
    assert since(ok + dead) == pytest.approx(20.301)  # first refusal after the last answer
    assert since(ok + blip + cut + dead) == pytest.approx(20.2)  # earlier refusals: end of the last answer
    assert since(ok + blip) is None  # it answered after its last refusal
    assert since(dead) == pytest.approx(20.301)  # never answered
