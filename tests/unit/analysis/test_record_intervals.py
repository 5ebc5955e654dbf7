"""swarm/analysis/record_intervals.py: a stage's intervals from its records (QPS by batch means over
sends, percentiles over the exact values), and none where a stage has no window or QPS."""

from __future__ import annotations

import numpy as np
import pandas as pd

from swarm.analysis.record_intervals import KEYS, stage_intervals


def _records(n: int = 2000, span_s: float = 60.0, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = np.sort(rng.uniform(0.0, span_s, n))
    ttft = rng.lognormal(np.log(0.1), 0.3, n)
    return pd.DataFrame(
        {
            "start_wall_s": start,
            "outcome": "ok",
            "warmup": False,
            "ttft_s": ttft,
            "tpot_s": rng.uniform(0.02, 0.03, n),
            "e2e_s": ttft + 1.0,
        }
    )


def test_intervals_hold_the_stage_s_own_figures():
    df = _records()
    qps = len(df) / 60.0
    ci = stage_intervals(df, 0.0, 60.0, 2.0, qps)
    assert set(ci) == {"qps", *KEYS}
    low, high = ci["qps"]
    assert low < qps < high and high - low < 0.5 * qps
    p50 = float(np.quantile(df.ttft_s, 0.5))
    low, high = ci["ttft_p50"]
    assert low <= p50 <= high and high - low < 0.2 * p50


def test_no_window_or_no_qps_gives_no_interval():
    df = _records(200)
    assert stage_intervals(df, None, 60.0, 2.0, 3.3) == dict.fromkeys(("qps", *KEYS))
    assert stage_intervals(df, 0.0, 60.0, 2.0, None) == dict.fromkeys(("qps", *KEYS))
