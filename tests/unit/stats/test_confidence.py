"""The 95% intervals of swarm/stats/confidence.py: coverage over many seeded samples of known
processes (Poisson and closed-loop completions for QPS, an exponential distribution for
percentiles), no interval (with its reason) where the data cannot give one, percentile intervals
never narrower than the sketch's bins, the t table and the across-runs interval.
In-process, a few seconds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swarm.stats.confidence import (
    NO_WINDOW,
    REACHES_ZERO,
    TOO_FEW_DF,
    NoInterval,
    Z,
    mean_interval,
    min_samples,
    obm_df,
    order_statistic_ranks,
    qps_interval,
    quantile_interval,
    t975,
)
from swarm.stats.sketch import REL_ACCURACY, LatencyStats


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


def test_qps_interval_batches_at_least_one_e2e_and_needs_four_degrees_of_freedom():
    bins = dict.fromkeys(range(0, 100), 10)
    # constant counts: no spread, but never narrower than one completion over the window
    assert qps_interval(bins, 0.5, 0.0, 50.0, 20.0) == pytest.approx((20.0 - 1 / 50, 20.0 + 1 / 50))
    assert not isinstance(qps_interval(bins, 0.5, 0.0, 2.9, 20.0), NoInterval)  # 5 bins: df 4
    assert qps_interval(bins, 0.5, 0.0, 1.9, 20.0) == NoInterval(TOO_FEW_DF)  # 3 bins: df 2
    assert qps_interval(bins, 0.5, 0.0, 2.9, 20.0, mean_e2e_s=1.0) == NoInterval(TOO_FEW_DF)
    assert qps_interval(bins, 0.5, None, 10.0, 20.0) == NoInterval(NO_WINDOW)
    sparse = {b: int(b % 10 == 0) for b in range(0, 100)}  # 1 completion per 5 s: reaches 0
    assert qps_interval(sparse, 0.5, 0.0, 9.9, 0.2) == NoInterval(REACHES_ZERO)


def test_overlapping_batch_degrees_of_freedom():
    assert obm_df(6, 1) == 5 and obm_df(2, 2) == 0 and obm_df(3, 5) == 0
    rng = np.random.default_rng(3)  # the Satterthwaite df of the estimator, by simulation
    for n, b in ((12, 4), (60, 20), (30, 3)):
        y = np.cumsum(np.concatenate((np.zeros((20000, 1)), rng.normal(size=(20000, n))), axis=1), axis=1)
        means = (y[:, b:] - y[:, :-b]) / b
        v = np.sum((means - y[:, -1:] / n) ** 2, axis=1)
        assert 2 * v.mean() ** 2 / v.var() == pytest.approx(obm_df(n, b), rel=0.06)
        assert obm_df(n, b) > n // b - 1  # more than non-overlapping batches of the same window


def _closed_loop_bins(rng, users: int, mean_s: float, total_s: float) -> tuple[dict[int, int], np.ndarray]:
    """Completions of `users` back-to-back requests with gamma(4) durations of mean `mean_s`."""
    ends = []
    for _ in range(users):
        t = rng.uniform(0, mean_s)
        while t < total_s:
            t += rng.gamma(4.0, mean_s / 4.0)
            ends.append(t)
    end = np.asarray(ends)
    keys, counts = np.unique(np.floor(end / 0.5).astype(int), return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True)), end


def test_short_stage_qps_interval_covers_a_closed_loop_or_is_absent():
    """8 users, requests of 1.2 s on average: 4.5 s stages are too short (the old 2-batch
    interval reached 0 in 62% of them), 6 s stages get an interval that covers the rate."""
    rng = np.random.default_rng(7)
    users, mean_s, truth = 8, 1.2, 8 / 1.2
    covered = trials = 0
    for _ in range(40):
        bins, ends = _closed_loop_bins(rng, users, mean_s, 200.0)
        for w in range(20):
            start = 10.0 + w * 9.0 + 0.13
            for length in (4.5, 6.0):
                qps = np.count_nonzero((ends >= start) & (ends < start + length)) / length
                ci = qps_interval(bins, 0.5, start, start + length, qps, mean_s)
                if length == 4.5:
                    assert ci == NoInterval(TOO_FEW_DF)
                    continue
                assert not isinstance(ci, NoInterval) and 0 < ci[0] < qps < ci[1]
                covered += ci[0] <= truth <= ci[1]
                trials += 1
    assert 0.93 <= covered / trials <= 1.0, covered / trials


def test_quantile_interval_covers_the_true_percentile():
    rng = np.random.default_rng(5)
    for q, n in ((0.5, 300), (0.99, 2000), (0.99, 400)):
        truth = -math.log(1 - q)  # exponential(1)
        covered = 0
        for _ in range(200):
            s = LatencyStats()
            s.extend(rng.exponential(1.0, n).tolist())
            lo, hi = quantile_interval(s, q)
            covered += lo <= truth <= hi
        assert covered >= 186, (q, n, covered)


def test_order_statistic_ranks_are_the_exact_binomial_ones():
    assert order_statistic_ranks(100, 0.5) == (39, 60)  # the textbook 40th and 61st of 100
    for n, q in ((6, 0.5), (40, 0.9), (368, 0.99), (500, 0.99), (1000, 0.5)):
        r, s = order_statistic_ranks(n, q)  # 0-based: X_(r+1) .. X_(s+1)

        def cdf(k, n=n, q=q):  # P(B <= k), B ~ Bin(n, q)
            return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1))

        assert cdf(r) <= 0.025 < cdf(r + 1) and cdf(s) >= 0.975 > cdf(s - 1), (n, q)


def test_too_small_a_sample_gives_no_interval_and_says_why():
    assert min_samples(0.99) == 368 and min_samples(0.5) == 6  # 0.99^368 <= 2.5% < 0.99^367
    rng = np.random.default_rng(2)
    for q, need in ((0.99, 368), (0.5, 6)):
        s = LatencyStats()
        s.extend(rng.exponential(1.0, need - 1).tolist())
        ci = quantile_interval(s, q)
        assert isinstance(ci, NoInterval) and f"p{q * 100:g} needs >= {need}" in ci.reason
        s.add(1.0)
        assert not isinstance(quantile_interval(s, q), NoInterval)
    assert isinstance(quantile_interval(LatencyStats(), 0.5), NoInterval)


def test_percentile_interval_never_narrower_than_the_sketch_resolution():
    """The issue's '93.9ms [93.9ms, 93.9ms]': values all in one sketch bin (or all equal) gave a
    zero-width interval; now each bound reaches its bin's edge, around the estimate too."""
    rng = np.random.default_rng(4)
    for values in ([0.0939] * 500, (1.470 + rng.uniform(0, 0.001, 3000)).tolist(), rng.lognormal(0, 1, 5000)):
        s = LatencyStats()
        s.extend(list(values))
        for q in (0.5, 0.99):
            est = s.quantile(q)
            lo, hi = quantile_interval(s, q)
            assert lo <= est / (1 + REL_ACCURACY) and hi >= est / (1 - REL_ACCURACY)
            assert hi / lo >= (1 + REL_ACCURACY) / (1 - REL_ACCURACY) * (1 - 1e-12)


def test_across_runs():
    mean, (lo, hi) = mean_interval([10.0, 12.0, 11.0])
    assert mean - lo == pytest.approx(hi - mean)
    assert mean == 11.0 and hi - mean == pytest.approx(t975(2) * 1.0 / math.sqrt(3))
    assert mean_interval([5.0]) == (5.0, None)


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
