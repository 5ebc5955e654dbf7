"""The change between two runs' estimates (swarm/stats/difference.py): MOVER's interval on known
normal cases, an asymmetric interval kept asymmetric, and the false-significance rate over many
seeded draws of two runs of the same thing (20 metrics x 50 comparisons). In-process, well under a
second."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swarm.stats.confidence import Z
from swarm.stats.difference import Estimate, change, expected_false_marks, mover


def test_symmetric_intervals_give_the_textbook_difference():
    lo, hi = mover(100.0, 95.0, 105.0, 110.0, 104.0, 116.0)
    assert (lo, hi) == pytest.approx((10 - math.hypot(5, 6), 10 + math.hypot(5, 6)))


def test_asymmetric_intervals_keep_their_shape():
    # b's interval reaches far above, not below: the difference's reaches far above too
    lo, hi = mover(1.0, 0.9, 1.1, 2.0, 1.9, 4.0)
    assert 1.0 - lo == pytest.approx(math.hypot(0.1, 0.1)) and hi - 1.0 == pytest.approx(math.hypot(2.0, 0.1))


def test_significance_and_the_relative_interval():
    up = change(Estimate(10.0, 9.0, 11.0), Estimate(13.0, 12.0, 14.0))
    assert up.significant and up.relative == pytest.approx(0.3) and 0 < up.rel_low < 0.3 < up.rel_high
    same = change(Estimate(10.0, 9.0, 11.0), Estimate(11.0, 10.0, 12.0))
    assert same.significant is False and same.rel_low < 0 < same.rel_high
    # two 95% intervals that just touch: a difference at ~99.4%, significant (an overlap test says not)
    touch = change(Estimate(10.0, 9.0, 11.0), Estimate(12.0, 11.0, 13.0))
    assert touch.significant is True
    unjudged = change(Estimate(10.0), Estimate(20.0, 19.0, 21.0))
    assert unjudged.significant is None and unjudged.relative == pytest.approx(1.0) and unjudged.low is None
    zero = change(Estimate(0.0, 0.0, 0.5), Estimate(1.0, 0.5, 1.5))  # not positive: the raw difference
    assert zero.relative is None and zero.rel_low is None and zero.significant is True


def test_expected_false_marks():
    assert expected_false_marks(20) == pytest.approx(1.0)


def _false_marks(rng: np.random.Generator, log_sd: np.ndarray) -> int:
    """Two runs of the same thing per metric, lognormal estimates with their exact 95% intervals."""
    truth = rng.uniform(0.05, 50.0, size=log_sd.size)
    marks = 0
    a = truth * np.exp(rng.normal(0, log_sd))
    b = truth * np.exp(rng.normal(0, log_sd))
    for x, y, s in zip(a, b, log_sd, strict=True):
        ea = Estimate(float(x), float(x * math.exp(-Z * s)), float(x * math.exp(Z * s)))
        eb = Estimate(float(y), float(y * math.exp(-Z * s)), float(y * math.exp(Z * s)))
        marks += bool(change(ea, eb).significant)
    return marks


def test_two_runs_of_the_same_thing_are_marked_at_the_level():
    rng = np.random.default_rng(39)
    metrics, repeats = 20, 50
    per_comparison = [_false_marks(rng, rng.uniform(0.01, 0.3, size=metrics)) for _ in range(repeats)]
    rate = sum(per_comparison) / (metrics * repeats)
    # 1000 comparisons at 5%: sd 0.7%; the count is stated in the CHANGELOG
    assert 0.03 <= rate <= 0.05 + 0.02, rate
    assert np.mean(per_comparison) <= expected_false_marks(metrics) + 0.4


def test_a_real_change_is_found():
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(200):
        a = 10 * math.exp(rng.normal(0, 0.02))
        b = 11 * math.exp(rng.normal(0, 0.02))  # +10%, each estimate's sd 2%: ~3.5 sds apart
        c = change(
            Estimate(a, a * math.exp(-Z * 0.02), a * math.exp(Z * 0.02)),
            Estimate(b, b * math.exp(-Z * 0.02), b * math.exp(Z * 0.02)),
        )
        found += bool(c.significant)
    assert found >= 0.9 * 200
