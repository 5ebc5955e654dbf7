"""Cancelled requests and completion windows: counted once, apart from failures, merged exactly;
rates count what finished inside a window, and the drain after the stop is its own line."""

from __future__ import annotations

import msgpack
import pytest

from swarm.analysis.table import drain_line, render
from swarm.core.records import Outcome, RequestRecord
from swarm.stats import quantiles, slo, summary
from swarm.stats.aggregate import DRAIN, Aggregate

T0 = 1_700_000_000.0


def rec(
    outcome: Outcome = Outcome.OK, stage: int = 0, tokens: int = 10, start: float = T0, e2e: float = 1.0
) -> RequestRecord:
    return RequestRecord(
        workload="short_qa",
        start_wall_s=start,
        outcome=outcome,
        stage=stage,
        ttft_s=0.1,
        e2e_s=e2e,
        output_tokens=tokens,
        error="cut by the swarm's stop while in flight (streaming)" if outcome is Outcome.CANCELLED else None,
    )


def test_cancelled_is_neither_ok_nor_failed():
    assert not Outcome.CANCELLED.failed and Outcome.CANCELLED is not Outcome.OK
    agg = Aggregate()
    agg.add(rec(), 0)
    agg.add(rec(Outcome.CANCELLED), DRAIN)
    agg.add(rec(Outcome.TIMEOUT), 0)
    cell = agg.combined()
    assert (cell.requests, cell.cancelled, cell.failed) == (3, 1, 1)
    assert "cancelled" not in cell.failures and cell.failures["timeout"] == 1
    assert "cancelled" not in cell.errors  # its message is not an error message
    assert cell.latencies["e2e"].count == 1  # only the ok one: a cut E2E is no latency
    assert quantiles.error_rate(cell.requests, cell.failed, cell.cancelled) == 0.5


def test_completions_by_window_merge_exactly_over_the_wire():
    one, workers = Aggregate(), [Aggregate(), Aggregate(), Aggregate()]
    plan = [
        (Outcome.OK, 0, 0),
        (Outcome.OK, 0, 1),
        (Outcome.OK, 1, 1),
        (Outcome.CANCELLED, 1, DRAIN),
        (Outcome.OK, 1, DRAIN),
    ]
    for i, (outcome, stage, window) in enumerate(plan * 7):
        r = rec(outcome, stage, tokens=i)
        one.add(r, window)
        workers[i % 3].add(r, window)
    master = Aggregate()
    for w in workers:
        master.merge(Aggregate.from_wire(msgpack.unpackb(msgpack.packb(w.to_wire()))))
    a, b = one.combined(), master.combined()
    assert a.completed == b.completed
    assert a.completed_in([0])[0] == 7 and a.completed_in([1])[0] == 14 and a.completed_in([DRAIN])[0] == 14
    assert a.completed_in() == (21, sum(i for i, p in enumerate(plan * 7) if p[2] != DRAIN))


def test_summary_rates_count_completions_in_the_window_and_the_drain_apart():
    """10 s of load, then a drain: QPS is what finished in the 10 s over 10 s, not all over 10 s."""
    agg = Aggregate()
    for _ in range(20):
        agg.add(rec(stage=0, tokens=5), 0)
    for i in range(6):  # in flight at the stop: 6 finish in the drain (the last 15 s after it), 2 are cut
        agg.add(rec(stage=0, tokens=5, start=T0 + 9, e2e=6.0 + 2 * i), DRAIN)
    for _ in range(2):
        agg.add(rec(Outcome.CANCELLED, stage=0, tokens=1), DRAIN)
    s = summary.build(agg, run_id="r", start_s=T0, stopped_s=T0 + 10, end_s=T0 + 25)
    total = s["total"]
    assert s["duration_s"] == 10.0
    assert (total["requests"], total["completed"], total["cancelled"]) == (28, 20, 2)
    assert total["qps"] == 2.0 and total["output_tok_s"] == 10.0
    assert s["drain"] == {"requests": 8, "output_tokens": 32, "cancelled": 2, "duration_s": 15.0}
    assert s["short_qa"]["qps"] == 2.0
    table = render(s)
    assert "cancel" in table.splitlines()[0]
    assert (
        drain_line(s)
        == "drain: 8 requests finished in the 15.0 s after the stop (not in QPS); 2 cancelled by the stop"
    )
    assert drain_line(s) in table
    verdict = slo.evaluate(slo.parse("error_rate<=1%"), s)[0]
    assert verdict.ok and verdict.value == 0.0  # the 2 cancelled are not errors


def test_stage_rates_count_what_finished_inside_the_stage():
    """Sent in stage 0 and finished in stage 1: stage 1's QPS (it completed there), stage 0's latency."""
    agg = Aggregate()
    for _ in range(10):
        agg.add(rec(stage=0), 0)
    for _ in range(4):
        agg.add(rec(stage=0), 1)  # crossed the stage change
    for _ in range(6):
        agg.add(rec(stage=1), 1)
    s = summary.build(
        agg,
        run_id="r",
        start_s=T0,
        stopped_s=T0 + 20,
        end_s=T0 + 20,
        stage_windows={0: (T0, T0 + 10), 1: (T0 + 10, T0 + 20)},
    )
    st = {e["stage"]: e for e in s["stages"]}
    assert (st[0]["total"]["requests"], st[0]["total"]["completed"], st[0]["total"]["qps"]) == (14, 10, 1.0)
    assert (st[1]["total"]["requests"], st[1]["total"]["completed"], st[1]["total"]["qps"]) == (6, 10, 1.0)
    assert st[0]["short_qa"]["qps"] == 1.0 and st[1]["short_qa"]["qps"] == 1.0
    assert s["drain"]["requests"] == 0 and drain_line(s) is None


def test_records_without_a_window_complete_in_their_own_stage():
    """Re-aggregating records.parquet (no completion times kept) keeps the old meaning."""
    agg = Aggregate()
    agg.add(rec(stage=2))
    assert agg.combined().completed == {2: [1, 10, 0]}


def test_cancelled_by_client_is_counted_apart_per_stage_out_of_latencies_and_failures():
    """--cancel: the client's hang-ups are neither ok nor failed, nor the stop's `cancelled`; their
    cut latencies stay out of every percentile; each stage's block counts its own."""
    agg = Aggregate()
    for stage in (0, 1):
        for _ in range(4):
            agg.add(rec(stage=stage, e2e=1.0), stage)
    for stage, n in ((0, 1), (1, 3)):
        for _ in range(n):
            agg.add(rec(Outcome.CANCELLED_BY_CLIENT, stage=stage, e2e=0.05), stage)
    agg.add(rec(Outcome.TIMEOUT), 1)
    cell = agg.combined()
    assert (cell.requests, cell.cancelled_by_client, cell.cancelled, cell.failed) == (13, 4, 0, 1)
    assert "cancelled_by_client" not in cell.failures and cell.latencies["e2e"].count == 8
    assert cell.latencies["e2e"].min == 1.0  # no hang-up's 50 ms in the percentiles
    wire = Aggregate.from_wire(msgpack.unpackb(msgpack.packb(agg.to_wire())))
    assert wire.combined().cancelled_by_client == 4  # merged exactly
    s = summary.build(agg, run_id="r", stage_windows={0: (T0, T0 + 10), 1: (T0 + 10, T0 + 20)})
    assert s["total"]["cancelled_by_client"] == 4 and s["total"]["cancelled"] == 0
    assert [st["total"]["cancelled_by_client"] for st in s["stages"]] == [1, 3]
    assert s["total"]["e2e_s"]["p50"] == pytest.approx(1.0, rel=0.01)
    assert (
        "cancelled by the client (--cancel): 4 of 13 requests (30.8%); per stage: stage 1: 1, stage 2: 3 (not in the"
        in render(s)
    )
    # an error rate over the requests that ran to an end: 1 timeout of 9
    verdict = slo.evaluate(slo.parse("error_rate<=20%"), s)[0]
    assert verdict.value == pytest.approx(1 / 9)
