"""Confidence intervals from what the master has: per-second completion counts and latency sketches.

The master never holds the records (only mergeable cells: swarm/stats/aggregate.py), so a bootstrap
over records is not available there. Two intervals that need only the cells, both at 95%:

- **QPS: batch means over completion counts per time bin.** Each cell counts its completions per
  BIN_S (0.5 s) of wall-clock time (`Cell.per_bin`). The bins that lie wholly inside the window
  are cut into `k` consecutive batches of `b` bins; the batch rates are treated as independent,
  so the half-width is t(0.975, k-1) * sd(batch rates) / sqrt(k), set around the reported QPS.
  Batches are at least as long as the mean E2E (a closed loop's completions come in waves about
  one request long, so neighbouring bins are correlated; batches that long are close to
  independent) and at most 30 batches are used. Fewer than 2 batches: no interval (None). Batch
  means is the standard interval for the mean of a stationary, autocorrelated series (Law &
  Kelton, Simulation Modeling and Analysis, ch. 9); a bootstrap of single bins would ignore the
  correlation and come out too narrow.
- **Percentiles: the distribution-free order-statistic interval.** For n successful requests, the
  p-quantile lies between the order statistics of ranks n*p -/+ 1.96*sqrt(n*p*(1-p)) (the normal
  approximation of the binomial count of values below it) with 95% confidence, whatever the
  distribution, under independent requests. The sketch returns those ranks' values within its
  0.5% relative accuracy; ranks past the ends are clamped (the interval then reaches the exact
  min or max). No interval under 10 requests.
- **Across runs (`swarm run --repeat N`):** the Student t interval of the runs' values.
- **Is a difference noise (`swarm compare`)?** Two independent estimates with 95% half-widths
  h_a and h_b differ beyond the noise when |a - b| > sqrt(h_a^2 + h_b^2) (the half-width of the
  difference's interval, for roughly normal estimates).

Pure: no I/O. The coverage of the QPS interval is tested against a long run of the simulator
(tests/integration/test_confidence_coverage.py).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Protocol

LEVEL = 0.95
Z = 1.959963984540054  # the normal's 0.975 quantile
MAX_BATCHES = 30
MIN_LATENCY_SAMPLES = 10
# Student t 0.975 quantiles by degrees of freedom (1..30), then by 1/df interpolation to the normal.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
_T975_TAIL = ((40, 2.021), (60, 2.000), (120, 1.980))

Interval = tuple[float, float]


class Sketch(Protocol):
    """What `quantile_interval` reads (swarm/stats/sketch.py `LatencyStats`)."""

    @property
    def count(self) -> int: ...
    def quantile(self, q: float) -> float | None: ...


def t975(df: int) -> float:
    """Student t's 0.975 quantile for `df` >= 1 degrees of freedom (table; 1/df interpolation past 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    if df <= len(_T975):
        return _T975[df - 1]
    points = ((len(_T975), _T975[-1]), *_T975_TAIL, (math.inf, Z))
    for (d0, t0), (d1, t1) in itertools.pairwise(points):
        if df <= d1:
            x0, x1, x = 1 / d0, (0.0 if d1 == math.inf else 1 / d1), 1 / df
            return t0 + (t1 - t0) * (x0 - x) / (x0 - x1)
    return Z


def qps_interval(
    per_bin: Mapping[int, int],
    bin_s: float,
    start_s: float | None,
    end_s: float | None,
    qps: float,
    mean_e2e_s: float | None = None,
) -> Interval | None:
    """95% interval of the QPS of the window [start_s, end_s) from completions per bin (bin b covers
    [b * bin_s, (b + 1) * bin_s); batch means, see the module's docstring); None when the window is
    too short for 2 batches."""
    if start_s is None or end_s is None:
        return None
    first, last = math.ceil(start_s / bin_s), math.floor(end_s / bin_s)  # whole bins [first, last)
    bins = last - first
    batch = max(1, math.ceil((mean_e2e_s or 0.0) / bin_s), math.ceil(bins / MAX_BATCHES))
    k = bins // batch
    if k < 2:
        return None
    rates = [
        sum(per_bin.get(first + i * batch + j, 0) for j in range(batch)) / (batch * bin_s) for i in range(k)
    ]
    half = t975(k - 1) * statistics.stdev(rates) / math.sqrt(k)
    return (max(0.0, qps - half), qps + half)


def quantile_interval(sketch: Sketch, q: float) -> Interval | None:
    """95% distribution-free interval of the nearest-rank-lower q-quantile (order statistics, see
    the module's docstring); None under MIN_LATENCY_SAMPLES values."""
    n = sketch.count
    if n < MIN_LATENCY_SAMPLES:
        return None
    centre = q * (n - 1)
    spread = Z * math.sqrt(n * q * (1 - q))
    lo_rank = max(0, math.floor(centre - spread))
    hi_rank = min(n - 1, math.ceil(centre + spread))
    lo, hi = sketch.quantile(lo_rank / (n - 1)), sketch.quantile(hi_rank / (n - 1))
    if lo is None or hi is None:
        return None
    return (lo, hi)


def mean_interval(values: Sequence[float]) -> tuple[float, Interval | None]:
    """The mean of `values` and its 95% Student t interval (None for fewer than 2 values)."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, (mean - half, mean + half)


def half_width(interval: Sequence[float] | None) -> float | None:
    return None if interval is None else (interval[1] - interval[0]) / 2


def beyond_noise(
    a: float, a_interval: Sequence[float] | None, b: float, b_interval: Sequence[float] | None
) -> bool | None:
    """Whether a and b differ by more than their intervals' combined half-width; None without both."""
    ha, hb = half_width(a_interval), half_width(b_interval)
    if ha is None or hb is None:
        return None
    return abs(b - a) > math.hypot(ha, hb)
