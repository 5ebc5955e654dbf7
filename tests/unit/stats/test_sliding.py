"""swarm/stats/sliding.py: each report merged once into its arrival second's slot; a window merges
the slots begun in it; slots older than the longest window are dropped as new ones begin."""

from __future__ import annotations

from swarm.core.records import RequestRecord
from swarm.stats.aggregate import Aggregate, ReportRead
from swarm.stats.sliding import SLOT_S, SlidingWindow


def _report(n: int, ttft_s: float = 0.1) -> ReportRead:
    agg = Aggregate()
    for _ in range(n):
        agg.add(RequestRecord("chat", 1.0, ttft_s=ttft_s, e2e_s=1.0, output_tokens=2))
    return Aggregate.read_wire(agg.to_wire())


def test_reports_are_merged_per_slot_and_a_window_merges_the_slots_begun_in_it():
    w = SlidingWindow(10.0)
    for i in range(600):  # 200 reports a second for 3 s: three slots, not 600 reports kept
        w.add(1000.0 + i / 200, _report(1, 0.1 if i < 400 else 0.4))
    assert w.starts() == [1000.0, 1001.0, 1002.0] and SLOT_S == 1.0
    assert w.window(1005.0, 10.0).combined().requests == 600
    assert w.window(1010.5, 10.0).combined().requests == 400  # 1000.0 begun before 1000.5: out
    late = w.window(1012.0, 10.0).combined()  # 1002.0's only
    assert late.requests == 200 and late.latencies["ttft"].quantile(0.5) == late.latencies["ttft"].max
    assert w.window(1003.5, 2.0).combined().requests == 200  # a shorter window of the same slots
    assert w.starts() == [1002.0]  # the older ones dropped (past the 10 s span)


def test_without_readings_only_the_spans_slots_are_kept():
    w = SlidingWindow(10.0)
    for i in range(60):
        w.add(2000.0 + i, _report(1))
    assert w.starts() == [2049.0 + i for i in range(11)]
    w.clear()
    assert w.starts() == [] and not w.window(2100.0, 10.0)


def test_a_window_is_a_fresh_aggregate():
    w = SlidingWindow(5.0)
    w.add(10.0, _report(3))
    first = w.window(10.5, 5.0)
    first.merge(first)  # changing what a reading returned changes nothing kept
    assert w.window(10.5, 5.0).combined().requests == 3
