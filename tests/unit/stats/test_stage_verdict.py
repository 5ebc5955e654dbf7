"""A stage's verdict (swarm/stats/stage_verdict.py): objectives read with their intervals, when a
stage may end."""

from __future__ import annotations

import random

import pytest

from swarm.stats import slo
from swarm.stats.sketch import LatencyStats
from swarm.stats.stage_verdict import MIN_OK, Measure, goodput_measure, judge_stage, measure


def test_measure_decides_only_when_the_interval_clears_the_threshold():
    rng = random.Random(3)
    sk = LatencyStats()
    sk.extend([rng.uniform(0.1, 0.5) for _ in range(1000)])
    block = {"ttft_s": {"p99": sk.quantile(0.99)}, "requests": 1000, "failures": {}}
    (far,) = slo.parse("ttft_p99<=800ms")
    m = measure(far, block, {"ttft": sk})
    assert m.ok and m.decided and m.ratio < 1
    (near,) = slo.parse("ttft_p99<=0.496s")
    m = measure(near, block, {"ttft": sk})
    assert not m.decided
    (below,) = slo.parse("ttft_p99<=100ms")
    m = measure(below, block, {"ttft": sk})
    assert not m.ok and m.decided and m.ratio > 1


def M(ok: bool | None, decided: bool, value: float = 1.0, half: float = 0.5) -> Measure:
    return Measure("x", value, value - half, value + half, 1.0, ok, decided)


def test_judge_stage():
    assert not judge_stage([M(False, True)], 500, 1.0, 5.0, 30.0, 0.05).done  # before the minimum
    assert not judge_stage([M(True, True)], MIN_OK - 1, 10.0, 5.0, 30.0, 0.05).done  # too few to pass
    assert judge_stage([M(False, True)], MIN_OK - 1, 10.0, 5.0, 30.0, 0.05).done  # surely failing already
    v = judge_stage([M(True, True), M(False, True)], 500, 6.0, 5.0, 30.0, 0.05)
    assert v.done and v.ok is False and v.why == "decided"
    v = judge_stage([M(True, False)], 500, 6.0, 5.0, 30.0, 0.05)
    assert not v.done  # undecided and wide
    # narrow but straddling the threshold: no verdict yet (the knee's stability test ends it)
    assert not judge_stage([M(True, False, half=0.01)], 500, 6.0, 5.0, 30.0, 0.05).done
    v = judge_stage([M(True, False, half=0.01)], 500, 6.0, 5.0, 30.0, 0.05, stable_ends=True)
    assert v.done and v.why == "stable" and v.ok
    # at its longest, an interval still straddling the threshold is inconclusive, not a pass
    v = judge_stage([M(True, False)], 500, 30.0, 5.0, 30.0, 0.05)
    assert v.done and v.why == "inconclusive" and v.ok is None
    v = judge_stage([M(True, True)], 500, 30.0, 5.0, 30.0, 0.05)
    assert v.done and v.why == "longest" and v.ok


def test_goodput_min_reads_the_stage_blocks_share():
    """--goodput-min against the agreed summary key: block["goodput"]["share"] (0..1)."""
    m = goodput_measure({"goodput": {"slo": "ttft<=800ms", "met": 96, "rate": 9.6, "share": 0.96}}, 0.95)
    assert m.ok and m.ratio == pytest.approx(0.95 / 0.96)
    v = judge_stage([m], 500, 6.0, 5.0, 30.0, 0.05)
    assert v.done and v.ok
    m = goodput_measure({"goodput": {"slo": "ttft<=800ms", "met": 90, "rate": 9.0, "share": 0.90}}, 0.95)
    assert m.ok is False and m.ratio > 1
    assert judge_stage([m], 500, 6.0, 5.0, 30.0, 0.05).ok is False
    missing = goodput_measure({"qps": 10.0}, 0.95)  # run without --goodput: no data, never decided
    assert missing.ok is None and not judge_stage([missing], 500, 6.0, 5.0, 30.0, 0.05).done
