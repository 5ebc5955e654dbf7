"""A percentile's 95% interval from the request records when neighbouring requests are correlated.

The order-statistic interval (swarm/stats/confidence.py `quantile_interval`) assumes independent
requests: the count of values below the quantile is Binomial(n, q). In a closed loop they are not:
requests that share the server's batch share its step time, so TPOT and TTFT come in runs, and two
runs of the same plan differ by far more than that interval says (two repeats on the simulator's
virtual clock marked 3 to 8 of 20 stage metrics significant with it, where 1 is expected).

Here the share of values at or below the estimate, F = q, gets its variance from overlapping batch
means over time (the QPS interval's estimator, `obm_variance`, Meketon & Schmeiser 1984), of the
linearised ratio residual s_j - F c_j per BIN_S bin (c_j values in bin j, s_j of them <= the
estimate); se(F) = sqrt(var) / mean(c). Batches are at least one mean E2E long (`min_batch_bins`),
as for QPS. The interval is the order statistics at F -/+ t(0.975, df) se(F) (the sectioning form of
the order-statistic interval: Alexopoulos, Goldsman et al., *Sequest*, 2019 use the same idea), and
never narrower than the independent one. Under MIN_DF degrees of freedom, or when F + t se reaches
past the sample (too few requests for p99 with this much correlation): no interval. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from swarm.stats.confidence import (
    MAX_BATCHES,
    MIN_DF,
    TOO_FEW_DF,
    Interval,
    NoInterval,
    min_samples,
    obm_df,
    obm_variance,
    order_statistic_ranks,
    t975,
)

PAST_SAMPLE = "too few requests for this percentile with correlated neighbours (batch means)"


def batch_quantile_interval(
    values: Sequence[float], bins: Sequence[int], first: int, last: int, q: float, min_batch_bins: int = 1
) -> Interval | NoInterval:
    """95% interval of the nearest-rank-lower q-quantile of `values`, each in time bin `bins[i]`
    (only bins in [first, last) are kept), batch means over at least `min_batch_bins` bins."""
    v = np.asarray(values, dtype=np.float64)
    j = np.asarray(bins, dtype=np.int64) - first
    keep = (j >= 0) & (j < last - first)
    v, j = v[keep], j[keep]
    n, nbins = len(v), max(0, last - first)
    need = min_samples(q)
    if n < need:
        return NoInterval(
            f"p{q * 100:g} needs >= {need} successful requests for an order statistic on each side"
        )
    b = max(1, min_batch_bins, math.ceil(nbins / MAX_BATCHES))
    df = obm_df(nbins, b)
    if df < MIN_DF:
        return NoInterval(TOO_FEW_DF)
    ordered = np.sort(v)
    est = ordered[math.floor(q * (n - 1))]
    below = (v <= est).astype(np.float64)
    share = float(below.mean())
    counts = np.bincount(j, minlength=nbins).astype(np.float64)
    sums = np.bincount(j, weights=below, minlength=nbins)
    se = math.sqrt(obm_variance(sums - share * counts, b)) / float(counts.mean())
    t = t975(int(df))
    lo_share, hi_share = share - t * se, share + t * se
    if lo_share * n < 1 or hi_share * n > n - 1:
        return NoInterval(PAST_SAMPLE)
    r, s = order_statistic_ranks(n, q)  # the independent interval's ranks
    lo = min(ordered[r], ordered[max(0, math.ceil(lo_share * n) - 1)], est)
    hi = max(ordered[s], ordered[min(n - 1, math.ceil(hi_share * n))], est)
    return (float(lo), float(hi))
