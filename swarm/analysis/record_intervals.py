"""A stage's 95% intervals from its request records, for a run whose summary.json has none (a run on
the simulator's virtual clock, swarm/orchestrate/virtual_run.py; a summary from before `ci`).

The same two intervals the master computes from its cells (swarm/stats/confidence.py), on the
records instead: QPS by overlapping batch means over the requests sent per BIN_S of the stage's
measured window (after its warm-up; sends, as the records' `qps` counts the requests sent in the
stage), around the stage's QPS; each percentile over the exact values (non-warm-up successes, as
`block_from_records` reads them, binned by their send time) with batch means for the correlation
between neighbouring requests (swarm/stats/batch_quantile.py), so no sketch widening and no
independence assumed. The records allow that, the master's cells do not: `swarm compare` prefers
these intervals wherever a run has its records.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from swarm.stats.aggregate import BIN_S
from swarm.stats.batch_quantile import batch_quantile_interval
from swarm.stats.confidence import NoInterval, qps_interval
from swarm.stats.quantiles import PERCENTILES

KEYS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99")


def stage_intervals(
    records: Any, start_s: float | None, end_s: float | None, warmup_s: float, qps: float | None
) -> dict[str, list[float] | None]:
    """`<metric>` -> [low, high] or None for QPS and the KEYS percentiles of one stage's records
    (a pandas DataFrame), its window [start_s, end_s) and warm-up; as summary.json's `ci` holds them."""
    good = records[(records["outcome"] == "ok") & ~records["warmup"].fillna(False).astype(bool)]
    out: dict[str, list[float] | None] = {}
    if not qps or start_s is None or end_s is None:
        return dict.fromkeys(("qps", *KEYS))
    per_bin = Counter(math.floor(t / BIN_S) for t in records["start_wall_s"])
    e2e = good["e2e_s"].dropna()
    mean_e2e = float(e2e.mean()) if len(e2e) else 0.0
    found = qps_interval(per_bin, BIN_S, start_s + warmup_s, end_s, qps, mean_e2e)
    out["qps"] = None if isinstance(found, NoInterval) else list(found)
    first, last = math.ceil((start_s + warmup_s) / BIN_S), math.floor(end_s / BIN_S)
    batch = max(1, math.ceil(mean_e2e / BIN_S))
    for key in KEYS:
        name, stat = key.split("_")
        col = good[["start_wall_s", f"{name}_s"]].dropna()
        bins = (col["start_wall_s"] // BIN_S).astype(int).tolist()
        ci = batch_quantile_interval(col[f"{name}_s"].tolist(), bins, first, last, PERCENTILES[stat], batch)
        out[key] = None if isinstance(ci, NoInterval) else list(ci)
    return out
