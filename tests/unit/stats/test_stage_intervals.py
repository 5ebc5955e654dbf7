"""A stage's intervals (swarm/stats/stage_intervals.py): a quantile's from a sketch, the tail share's
from batch means."""

from __future__ import annotations

import math
import random

import pytest

from swarm.stats import slo
from swarm.stats.settling import SETTLE_WINDOW_S
from swarm.stats.sketch import LatencyStats
from swarm.stats.stage_intervals import TailShare, quantile_ci
from swarm.stats.stage_verdict import measure


def test_quantile_interval_covers_the_true_p99():
    rng = random.Random(7)
    true_p99 = -math.log(0.01)  # exponential(1)
    covered, widths = 0, []
    for _ in range(200):
        sk = LatencyStats()
        sk.extend([rng.expovariate(1.0) for _ in range(2000)])
        lo, hi = quantile_ci(sk, 0.99)
        covered += lo <= true_p99 <= hi
        widths.append(hi - lo)
    assert 0.88 <= covered / 200 <= 0.995  # a 95% interval (plus the sketch's 0.5%)
    small = LatencyStats()
    small.extend([rng.expovariate(1.0) for _ in range(200)])
    lo, hi = quantile_ci(small, 0.99)
    assert hi - lo > sum(widths) / len(widths)  # fewer samples, wider interval


def test_tail_share_reads_waves_not_independent_draws():
    """p99 <= T is "at most 1% above T". A closed loop's answers come in waves: one sub-window has
    none above T, the next 2%. The share (1%) is then undecided; the order-statistics interval
    of the first wave alone (300 answers, all below T) called the stage surely passing."""
    wave = LatencyStats()
    wave.extend([0.74] * 300)
    _low, high = quantile_ci(wave, 0.99)
    assert high <= 0.8  # the old reading: "decided pass" from a few seconds
    tail = TailShare()
    tail.add(0.0, 0, 0)  # the window opens
    n = above = 0
    for k in range(10):
        n += 200
        above += 0 if k % 2 == 0 else 4
        tail.add(SETTLE_WINDOW_S * (k + 1), n, above)
    share, half = tail.interval()
    assert share == pytest.approx(0.01) and half > 0.005  # neither side of 1%
    (o,) = slo.parse("ttft_p99<=800ms")
    m = measure(o, {"ttft_s": {"p99": 0.79}}, {"ttft": wave}, tail=(share, half), tail_judged=True)
    assert not m.decided
    assert not measure(o, {"ttft_s": {"p99": 0.79}}, {"ttft": wave}, tail_judged=True).decided  # no tail yet
    steady = TailShare()
    steady.add(0.0, 0, 0)
    for k in range(8):  # 0.1% above, every sub-window alike: surely passing
        steady.add(SETTLE_WINDOW_S * (k + 1), 1000 * (k + 1), k + 1)
    m = measure(o, {"ttft_s": {"p99": 0.7}}, {"ttft": wave}, tail=steady.interval(), tail_judged=True)
    assert m.decided and m.ok
    # no answer above T yet, too few to say so from the share: the magnitude decides a p99 far below
    quiet = LatencyStats()
    quiet.extend([0.1] * 600)
    none_above = TailShare()
    for k in range(4):
        none_above.add(SETTLE_WINDOW_S * k, 150 * k, 0)
    share, half = none_above.interval()
    assert share == 0 and half > 0.01  # the share alone: inconclusive
    m = measure(o, {"ttft_s": {"p99": 0.1}}, {"ttft": quiet}, tail=(share, half), tail_judged=True)
    assert m.decided and m.ok
    near = LatencyStats()
    near.extend([0.74] * 600)  # the same share, a p99 near T: no verdict
    assert not measure(
        o, {"ttft_s": {"p99": 0.74}}, {"ttft": near}, tail=(share, half), tail_judged=True
    ).decided
    short = TailShare()
    short.add(0.0, 0, 0)
    short.add(SETTLE_WINDOW_S, 500, 0)
    assert short.interval() is None  # one sub-window says nothing of the next


def test_count_above_reads_the_sketch():
    sk = LatencyStats()
    sk.extend([0.1] * 90 + [0.9] * 10)
    assert sk.count_above(0.8) == 10 and sk.count_above(0.05) == 100 and sk.count_above(1.0) == 0
