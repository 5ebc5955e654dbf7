"""The 95% intervals of swarm/stats/confidence.py: coverage over many seeded samples of known
processes (Poisson completions for QPS, an exponential distribution for percentiles), the t table,
the across-runs interval and the noise test. In-process, a few seconds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swarm.stats.confidence import (
    Z,
    beyond_noise,
    mean_interval,
    qps_interval,
    quantile_interval,
    t975,
)
from swarm.stats.sketch import LatencyStats


def test_t_quantiles():
    assert t975(1) == 12.706 and t975(10) == 2.228 and t975(30) == 2.042
    assert t975(40) == pytest.approx(2.021) and t975(120) == pytest.approx(1.980)
    assert 1.980 > t975(500) > Z and t975(10**9) == pytest.approx(Z, abs=1e-6)
    values = [t975(df) for df in range(1, 300)]
    assert values == sorted(values, reverse=True)
    with pytest.raises(ValueError):
        t975(0)


def test_qps_interval_covers_a_poisson_rate():
    rng = np.random.default_rng(11)
    rate, bin_s, start, end = 40.0, 0.5, 1000.2, 1006.2  # 6 s windows: 11 whole bins inside
    covered = trials = 0
    for _ in range(400):
        bins = {b: int(rng.poisson(rate * bin_s)) for b in range(1999, 2014)}
        inside = [bins[b] for b in range(math.ceil(start / bin_s), math.floor(end / bin_s))]
        qps = sum(inside) / (len(inside) * bin_s)
        lo, hi = qps_interval(bins, bin_s, start, end, qps)
        covered += lo <= rate <= hi
        trials += 1
    assert 0.91 <= covered / trials <= 0.99, covered


def test_qps_interval_batches_at_least_one_e2e_and_needs_two():
    bins = dict.fromkeys(range(0, 100), 10)
    assert qps_interval(bins, 0.5, 0.0, 50.0, 20.0) == (20.0, 20.0)  # constant: no spread
    assert qps_interval(bins, 0.5, 0.0, 1.9, 20.0) is not None  # 3 bins, 3 batches
    assert qps_interval(bins, 0.5, 0.0, 1.9, 20.0, mean_e2e_s=1.0) is None  # batches of 2 bins: 1
    assert qps_interval(bins, 0.5, None, 10.0, 20.0) is None


def test_quantile_interval_covers_the_true_percentile():
    rng = np.random.default_rng(5)
    for q, n in ((0.5, 300), (0.99, 2000)):
        truth = -math.log(1 - q)  # exponential(1)
        covered = 0
        for _ in range(200):
            s = LatencyStats()
            s.extend(rng.exponential(1.0, n).tolist())
            lo, hi = quantile_interval(s, q)
            covered += lo * 0.995 <= truth <= hi * 1.005  # the sketch's relative accuracy
        assert covered >= 180, (q, covered)
    few = LatencyStats()
    few.extend([0.1] * 9)
    assert quantile_interval(few, 0.5) is None


def test_across_runs_and_noise():
    mean, (lo, hi) = mean_interval([10.0, 12.0, 11.0])
    assert mean - lo == pytest.approx(hi - mean)
    assert mean == 11.0 and hi - mean == pytest.approx(t975(2) * 1.0 / math.sqrt(3))
    assert mean_interval([5.0]) == (5.0, None)
    assert beyond_noise(100.0, (95.0, 105.0), 120.0, (115.0, 125.0)) is True
    assert beyond_noise(100.0, (95.0, 105.0), 106.0, (101.0, 111.0)) is False
    assert beyond_noise(100.0, None, 120.0, (115.0, 125.0)) is None


def test_completion_bins_are_exact_and_only_merged_when_asked():
    from swarm.stats.aggregate import BIN_S
    from tests.helpers.synthetic import master_from_workers, synthetic_records

    recs = synthetic_records(600, workloads=("chat", "rag"), stages=(0, 1))
    agg = master_from_workers(recs, n_workers=3)
    want: dict[int, int] = {}
    for r in recs:
        b = int((r.start_wall_s + (r.e2e_s or 0.0)) / BIN_S)
        want[b] = want.get(b, 0) + 1
    assert agg.combined(bins=True).per_bin == want
    assert agg.combined().per_bin == {}  # the live views (/metrics, the LLM tab) skip them
