"""Confidence intervals from what the master has: per-bin completion counts and latency sketches.

The master never holds the records (only mergeable cells: swarm/stats/aggregate.py), so a bootstrap
over records is not available there. Two intervals that need only the cells, both at 95%; where
the data cannot give one, a `NoInterval` with the reason (summary.json `ci.reasons`, shown as "—"
and a footnote), never a degenerate interval:

- **QPS: overlapping batch means over completion counts per time bin.** Each cell counts its
  completions per BIN_S (0.5 s) of wall-clock time (`Cell.per_bin`). The n bins that lie wholly
  inside the window give n - b + 1 overlapping batches of b bins; b is at least one mean E2E
  (a closed loop's completions come in waves about one request long, so neighbouring bins are
  correlated; batches that long are close to independent) and at least n / MAX_BATCHES. The
  variance of the mean bin count is the overlapping-batch-means estimator (Meketon & Schmeiser
  1984; Law & Kelton, Simulation Modeling and Analysis, ch. 9), its degrees of freedom the
  Satterthwaite value tr(A)^2 / tr(A^2) of its quadratic form under independent bins (n - 1 for
  b = 1, about 1.5 (n/b - 1) for long batches: half as many again as non-overlapping batches from
  the same window). Half-width t(0.975, df) * sd, at least one completion over the window (a
  count's resolution), around the reported QPS. Under MIN_DF degrees of freedom (a window
  shorter than about 3.5 mean E2Es: the old 2-batch interval had t(1) = 12.7 and a lower bound
  of 0), or an interval that would reach 0 (too few completions), no interval.
- **Percentiles: the distribution-free order-statistic interval.** For n successful requests,
  the q-quantile lies between the order statistics X_(r) and X_(s) with r the largest and s the
  smallest rank such that the binomial count B ~ Bin(n, q) of values below the quantile has
  P(B < r) <= 2.5% and P(B >= s) <= 2.5% (exact binomial, equal tails: >= 95% whatever the
  distribution, under independent requests). Under `min_samples(q)` requests one of those ranks
  lies outside the sample (p99 needs 368: with fewer, nothing in the data lies above the 99th
  percentile with 97.5% confidence), and there is no interval. The sketch returns the two order
  statistics within its relative accuracy a (REL_ACCURACY, swarm/stats/sketch.py), so each bound
  is widened to its bin's edge (value / (1 + a) below, value / (1 - a) above) and the interval
  always holds the estimate's own bin: never narrower than the sketch can resolve.
- **Across runs (`swarm run --repeat N`):** the Student t interval of the runs' values.
- **Is a difference significant (`swarm compare`)?** swarm/stats/difference.py (MOVER over the two
  runs' intervals); from records, a percentile's interval counts correlated neighbours
  (swarm/stats/batch_quantile.py).

Pure: no I/O. The coverage of the QPS interval is tested against a long run of the simulator
(tests/integration/test_confidence_coverage.py), both intervals' on seeded samples of known
processes (tests/unit/stats/test_confidence.py).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from swarm.stats.sketch import REL_ACCURACY

LEVEL = 0.95
Z = 1.959963984540054  # the normal's 0.975 quantile
TAIL = (1 - LEVEL) / 2  # each side's share of the miss
MAX_BATCHES = 30
MIN_DF = 4  # t(0.975, 4) = 2.78; t(1) = 12.7 made 2-batch intervals reach 0
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


@dataclass(frozen=True)
class NoInterval:
    """No interval: the data cannot give one (summary.json `ci.reasons`; "—" in the tables)."""

    reason: str


NO_WINDOW = "no window: the stage's start or end is unknown"
TOO_FEW_DF = (
    f"under {MIN_DF} degrees of freedom: the window holds too few batches of one mean E2E "
    "(completions per 0.5 s bin, overlapping batch means)"
)
REACHES_ZERO = "too few completions: the interval would reach 0"


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


def obm_df(n: int, b: int) -> float:
    """Degrees of freedom of the overlapping-batch-means variance of n independent bins in batches
    of b: tr(A)^2 / tr(A^2) of its quadratic form (Satterthwaite); n - 1 for b = 1, 0 for b >= n."""
    if b >= n:
        return 0.0
    m = n - b + 1  # batches
    lag = np.arange(m)
    # inner products of the centred batch weight vectors, by the lag between two batches
    g = np.maximum(0, b - lag) / b**2 - 1 / n
    tr = m * g[0]
    tr2 = m * g[0] ** 2 + 2 * float(np.sum((m - lag[1:]) * g[1:] ** 2))
    return round(float(tr * tr / tr2), 9)  # exact n - 1 for b = 1, not 3.9999999999999996


def obm_variance(series: np.ndarray, b: int) -> float:
    """The overlapping-batch-means estimate of the variance of the mean of `series` (n values in
    time order, batches of b < n; see the module's docstring)."""
    n = len(series)
    cum = np.concatenate(([0.0], np.cumsum(series)))
    means = (cum[b:] - cum[:-b]) / b  # the n - b + 1 overlapping batches' means
    return b * float(np.sum((means - cum[-1] / n) ** 2)) / ((n - b + 1) * (n - b))


def qps_interval(
    per_bin: Mapping[int, int],
    bin_s: float,
    start_s: float | None,
    end_s: float | None,
    qps: float,
    mean_e2e_s: float | None = None,
) -> Interval | NoInterval:
    """95% interval of the QPS of the window [start_s, end_s) from completions per bin (bin i covers
    [i * bin_s, (i + 1) * bin_s); overlapping batch means, see the module's docstring); a
    NoInterval when the window gives under MIN_DF degrees of freedom or too few completions."""
    if start_s is None or end_s is None or end_s <= start_s:
        return NoInterval(NO_WINDOW)
    first, last = math.ceil(start_s / bin_s), math.floor(end_s / bin_s)  # whole bins [first, last)
    n = max(0, last - first)
    b = max(1, math.ceil((mean_e2e_s or 0.0) / bin_s), math.ceil(n / MAX_BATCHES))
    df = obm_df(n, b)
    if df < MIN_DF:
        return NoInterval(TOO_FEW_DF)
    counts = np.fromiter((per_bin.get(first + i, 0) for i in range(n)), dtype=np.float64, count=n)
    var = obm_variance(counts, b)
    half = max(t975(int(df)) * math.sqrt(var) / bin_s, 1.0 / (end_s - start_s))
    if qps - half <= 0:
        return NoInterval(REACHES_ZERO)
    return (qps - half, qps + half)


def min_samples(q: float) -> int:
    """The fewest values with an order statistic on each side of the q-quantile at 95%: the
    smallest n with max(q, 1 - q)^n <= 2.5% (368 for p99, 6 for p50)."""
    worst = max(q, 1 - q)
    if worst >= 1:
        raise ValueError(f"quantile must lie strictly between 0 and 1 (got {q})")
    n = max(1, math.ceil(math.log(TAIL) / math.log(worst)))
    while worst**n > TAIL:  # float noise at the boundary
        n += 1
    return n


def order_statistic_ranks(n: int, q: float) -> tuple[int, int]:
    """0-based ranks (r, s) of the order statistics bracketing the q-quantile of n >= min_samples(q)
    values at 95%: equal tails of the exact binomial (see the module's docstring)."""
    centre, sd = n * q, math.sqrt(n * q * (1 - q))
    reach = 12 * sd + 30  # the binomial's mass past this many sds is far below float resolution
    k = np.arange(max(0, math.floor(centre - reach)), min(n, math.ceil(centre + reach)) + 1)
    lo = int(k[0])
    first = (
        math.lgamma(n + 1)
        - math.lgamma(lo + 1)
        - math.lgamma(n - lo + 1)
        + lo * math.log(q)
        + (n - lo) * math.log1p(-q)
    )
    # log pmf(k + 1) - log pmf(k) = log((n - k) / (k + 1) * q / (1 - q)): one lgamma, then cumsum
    steps = np.log(n - k[:-1]) - np.log(k[:-1] + 1) + (math.log(q) - math.log1p(-q))
    log_pmf = first + np.concatenate(([0.0], np.cumsum(steps)))
    cdf = np.cumsum(np.exp(log_pmf))  # P(B <= k)
    below = k[cdf <= TAIL]  # lower rank (1-based) r: P(B <= r - 1) <= 2.5%, as large as that allows
    r1 = int(below[-1]) + 1 if below.size else 1
    s1 = int(k[np.argmax(cdf >= 1 - TAIL)]) + 1  # upper rank s: P(B <= s - 1) >= 97.5%
    return r1 - 1, min(s1, n) - 1


def _at_rank(sketch: Sketch, rank: int, n: int) -> float | None:
    """The sketch's value of the order statistic of 0-based `rank` (half a rank off the boundary,
    so float noise in rank / (n - 1) never lands on the neighbour)."""
    return sketch.quantile(1.0 if rank >= n - 1 else (rank + 0.5) / (n - 1))


def quantile_interval(sketch: Sketch, q: float, rel_accuracy: float = REL_ACCURACY) -> Interval | NoInterval:
    """95% distribution-free interval of the nearest-rank-lower q-quantile (order statistics
    widened to their sketch bins' edges, see the module's docstring); a NoInterval under
    min_samples(q) values."""
    n, need = sketch.count, min_samples(q)
    if n < need:
        return NoInterval(
            f"p{q * 100:g} needs >= {need} successful requests for an order statistic on each side"
        )
    lo_rank, hi_rank = order_statistic_ranks(n, q)
    lo, hi, est = _at_rank(sketch, lo_rank, n), _at_rank(sketch, hi_rank, n), sketch.quantile(q)
    if lo is None or hi is None or est is None:  # a sketch with a count holds values
        raise ValueError(f"sketch of {n} values returned no quantile")
    # each order statistic lies in its bin, value / (1 + a) .. value / (1 - a); the estimate's too
    return (min(lo, est) / (1 + rel_accuracy), max(hi, est) / (1 - rel_accuracy))


def mean_interval(values: Sequence[float]) -> tuple[float, Interval | None]:
    """The mean of `values` and its 95% Student t interval (None for fewer than 2 values)."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, (mean - half, mean + half)
