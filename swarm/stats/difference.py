"""The change between two runs' estimates, with its 95% interval, and whether it is significant.

Each run gives an estimate and its own 95% interval (summary.json `ci`: QPS by batch means, the
percentiles by order statistics, swarm/stats/confidence.py; across `--repeat` runs the Student t
interval of their mean). The two runs are independent, so the interval of the change is the
interval of a difference of two independent estimates, not an overlap test: two 95% intervals
that just touch already mean a difference at about 99.4% (overlap would mark too few changes).

**MOVER** (the method of variance estimates recovery; Zou & Donner 2008, *Construction of confidence
limits about effect measures*, Stat Med 27:1693; Newcombe 2013): with estimates a, b and intervals
[l_a, u_a], [l_b, u_b], the difference d = b - a has the interval

    L = d - sqrt((b - l_b)^2 + (u_a - a)^2),   U = d + sqrt((u_b - b)^2 + (a - l_a)^2)

It recovers each side's variance from its own interval's two halves, so an asymmetric interval (a
percentile's order statistics, a rate near 0) keeps its shape; with symmetric normal intervals it is
exactly d ± sqrt(h_a^2 + h_b^2), the textbook interval of a difference. The relative change b / a - 1
(what the tables print) is MOVER on the log scale (every compared metric is positive: logs of the
estimates and of their bounds), exponentiated: ratios of latencies and rates are multiplicative, and
the interval of b / a then holds a's uncertainty too, not only b's. A change is **significant** when
that interval excludes 0 (the ratio's excludes 1); either side without an interval: not judged.

At 95%, a comparison of two runs of the same thing marks about 5% of its metrics by chance: 20
stage metrics give about 1 false mark (`expected_false_marks`). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from swarm.stats.confidence import LEVEL


@dataclass(frozen=True)
class Estimate:
    """One run's value of a metric and its 95% interval (low, high; both None without one)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class Change:
    """B vs A: the difference b - a and its interval, the relative change b / a - 1 and its interval
    (None where a or a bound is not positive), and whether the change is significant (None: not
    judged, a side has no interval)."""

    delta: float
    low: float | None
    high: float | None
    relative: float | None
    rel_low: float | None
    rel_high: float | None
    significant: bool | None


def mover(
    a: float, a_low: float, a_high: float, b: float, b_low: float, b_high: float
) -> tuple[float, float]:
    """The 95% interval of b - a from the two independent estimates' 95% intervals (MOVER)."""
    d = b - a
    return (
        d - math.hypot(b - b_low, a_high - a),
        d + math.hypot(b_high - b, a - a_low),
    )


def _positive(*xs: float | None) -> bool:
    return all(x is not None and x > 0 for x in xs)


def change(a: Estimate, b: Estimate) -> Change:
    """The change from `a` (the baseline) to `b` (see the module's docstring)."""
    relative = b.value / a.value - 1 if a.value else None
    if not (a.has_interval and b.has_interval):
        return Change(b.value - a.value, None, None, relative, None, None, None)
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    # an estimate outside its own interval (a caller's rounding): the interval is widened to hold it
    al, ah, bl, bh = min(a.low, a.value), max(a.high, a.value), min(b.low, b.value), max(b.high, b.value)
    low, high = mover(a.value, al, ah, b.value, bl, bh)
    if _positive(a.value, b.value, al, bl):
        lo, hi = mover(*(math.log(x) for x in (a.value, al, ah, b.value, bl, bh)))
        rel_low, rel_high = math.expm1(lo), math.expm1(hi)
        return Change(b.value - a.value, low, high, relative, rel_low, rel_high, rel_low > 0 or rel_high < 0)
    return Change(b.value - a.value, low, high, relative, None, None, low > 0 or high < 0)


def expected_false_marks(comparisons: int, level: float = LEVEL) -> float:
    """How many of `comparisons` metrics that did not change a comparison marks by chance on average."""
    return comparisons * (1 - level)
