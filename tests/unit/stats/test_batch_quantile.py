"""A percentile's interval with batch means (swarm/stats/batch_quantile.py): never narrower than the
independent order-statistic one, wider when neighbours are correlated, covering the true percentile
of a correlated (AR(1)) process where the independent interval does not. In-process, about a second."""

from __future__ import annotations

import numpy as np

from swarm.stats.batch_quantile import batch_quantile_interval
from swarm.stats.confidence import NoInterval, order_statistic_ranks


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.normal()
    e = rng.normal(size=n) * np.sqrt(1 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def test_never_narrower_than_independent_and_none_when_too_few():
    rng = np.random.default_rng(1)
    v = rng.exponential(size=2000)
    bins = np.arange(2000) // 10  # 10 values per bin, 200 bins
    lo, hi = batch_quantile_interval(v, bins, 0, 200, 0.5)
    s = np.sort(v)
    r, t = order_statistic_ranks(2000, 0.5)
    assert lo <= s[r] and hi >= s[t]
    assert isinstance(batch_quantile_interval(v[:100], bins[:100], 0, 10, 0.99), NoInterval)
    assert isinstance(batch_quantile_interval(v, bins, 0, 3, 0.5), NoInterval)  # 3 bins: too few df


def test_covers_a_correlated_process():
    rng = np.random.default_rng(3)
    n, per_bin, misses_batch, misses_iid, trials = 3000, 10, 0, 0, 200
    for _ in range(trials):
        v = _ar1(rng, n, 0.9)  # true median 0
        lo, hi = batch_quantile_interval(v, np.arange(n) // per_bin, 0, n // per_bin, 0.5, min_batch_bins=10)
        misses_batch += not lo <= 0.0 <= hi
        s = np.sort(v)
        r, t = order_statistic_ranks(n, 0.5)
        misses_iid += not s[r] <= 0.0 <= s[t]
    assert misses_batch <= 16 and misses_iid >= 60, (misses_batch, misses_iid)
