"""The QPS interval's coverage on the simulator (issue 15: over 20 repeated short runs, the 95%
interval of QPS covers the long-run value in >= 17 of them), and the percentile intervals of the
same run: never narrower than the sketch's bins, absent (with the reason) where the sample is too
small.

One `swarm run`, closed loop at 8 users, 21 stages of 3 s at the same level: stage 0 is the
lead-in (users starting together), stages 1-20 are the 20 short runs. Each stage's 95% QPS interval
(summary.json `ci.qps`, overlapping batch means over 0.5 s completion bins:
swarm/stats/confidence.py) is checked against the long-run value, estimated for each stage by the
mean QPS of the 19 other stages (57 s of the same load, none of it the stage's own). A stage
without an interval counts as not covered (and must say why). The intervals must also be useful:
their median half-width under 30% of the QPS (an interval as wide as everything covers anything).
About 80 s on an idle 2-core machine (63 s of load, start and stop).
"""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from swarm.stats.confidence import min_samples
from swarm.stats.sketch import REL_ACCURACY
from tests.helpers.support import sim_server, swarm_cmd

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]
RUNS, STAGE_S, USERS = 20, 3, 8


def test_the_qps_interval_covers_the_long_run_value(tmp_path):
    out = tmp_path / "run"
    with sim_server(tmp_path, "--profile", "rtx5090x4-qwen3.6-27b", trace=False) as s:
        cmd = swarm_cmd("run", "--host", s.url, "--workers", "1", "--sweep", ",".join([str(USERS)] * (RUNS + 1)),
                        "--stage-time", f"{STAGE_S}s", "--out", str(out), "--workload", "short_qa",
                        "--stop-timeout", "5s", "--", "--max-tokens", "8")  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    stages = summary["stages"][1:]
    assert len(stages) == RUNS
    qps = [st["total"]["qps"] for st in stages]
    covered, widths = 0, []
    for i, st in enumerate(stages):
        ci = st["total"]["ci"]
        if ci["qps"] is None:
            assert ci["reasons"]["qps"], ci
            continue
        lo, hi = ci["qps"]
        long_run = statistics.fmean(q for j, q in enumerate(qps) if j != i)
        covered += lo <= long_run <= hi
        widths.append((hi - lo) / 2 / qps[i])
    assert covered >= 17, f"{covered} of {RUNS} intervals cover ({len(widths)} given); qps {qps}"
    print(f"QPS: {covered} of {RUNS} intervals cover, median half-width {statistics.median(widths):.1%}")
    assert statistics.median(widths) < 0.30, widths
    resolution = (1 + REL_ACCURACY) / (1 - REL_ACCURACY)
    for block in (*(st["total"] for st in stages), summary["total"]):
        ci = block["ci"]
        for key in ("ttft_p50", "ttft_p99", "e2e_p50", "e2e_p99"):
            metric, stat = key.split("_")
            if ci[key] is None:  # a 3 s stage has ~115 requests: no p99 interval, and it says why
                assert stat == "p99" and f"needs >= {min_samples(0.99)}" in ci["reasons"][key], (key, ci)
                continue
            lo, hi = ci[key]
            value = block[f"{metric}_s"][stat]
            assert lo < value < hi and hi / lo >= resolution * (1 - 1e-9), (key, value, ci[key])
    assert summary["total"]["ci"]["e2e_p99"] is not None  # the run's ~2,400 requests have one
