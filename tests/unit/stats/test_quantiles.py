"""swarm/stats/quantiles.py: exact percentiles (numpy's method="lower"), Prometheus histogram
quantiles, and the small rate/error formulas summary.json uses."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from swarm.stats.quantiles import (
    PERCENTILES,
    bucket_width,
    error_rate,
    histogram_quantile,
    latency_stats,
    percentile,
    quantile_bucket,
    rate,
    relative_error,
    tpot_s,
)


def test_exact_percentiles_are_numpys_nearest_rank_lower():
    rng = random.Random(5)
    for n in (1, 2, 7, 100, 1001):
        values = [rng.lognormvariate(0, 1) for _ in range(n)]
        stats = latency_stats(values)
        for key, q in PERCENTILES.items():
            expected = float(np.percentile(values, 100 * q, method="lower"))
            assert percentile(values, q) == expected == stats[key]
        assert stats["max"] == max(values) and stats["mean"] == pytest.approx(float(np.mean(values)))
    assert percentile([], 0.5) is None and latency_stats([])["p99"] is None
    with pytest.raises(ValueError):
        percentile([1.0], 1.5)


def test_histogram_quantile_interpolates_as_prometheus_does():
    bounds = [0.1, 0.5, 1.0, math.inf]
    counts = [10, 30, 40, 40]  # cumulative
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.1 + 0.4 * (10 / 20))  # rank 20
    assert histogram_quantile(0.1, bounds, counts) == pytest.approx(0.04)  # rank 4 of 10 in [0, 0.1]
    assert histogram_quantile(0.99, bounds, [10, 30, 40, 50]) == 1.0  # in +Inf: highest finite bound
    assert histogram_quantile(0.5, bounds, [0, 0, 0, 0]) is None
    assert histogram_quantile(0.5, [0.1, 0.5], [1, 2]) is None  # no +Inf bucket
    # a scrape race (a lower bucket above a higher one) is made monotonic, as Prometheus does
    assert histogram_quantile(0.5, bounds, [10, 8, 40, 40]) == histogram_quantile(
        0.5, bounds, [10, 10, 40, 40]
    )
    assert quantile_bucket(0.5, bounds, counts) == (0.1, 0.5)
    assert quantile_bucket(0.5, bounds, [0, 0, 0, 0]) is None
    assert bucket_width(bounds, 0.7) == pytest.approx(0.5) and bucket_width(bounds, 2.0) == math.inf


def test_rates_errors_and_tpot():
    assert rate(30, 10.0) == 3.0 and rate(30, None) == 0.0 and rate(30, 0.0) == 0.0
    assert error_rate(10, 2, cancelled=2) == 0.25 and error_rate(3, 0, cancelled=3) is None
    assert tpot_s(0.5, 2.5, 5) == pytest.approx(0.5) and tpot_s(0.5, 2.5, 1) is None
    assert relative_error(1.02, 1.0) == pytest.approx(0.02)
    assert relative_error(0.0, 0.0) == 0.0 and relative_error(1.0, 0.0) == math.inf
