"""`--prefix-cache bust` through a real `swarm run` on the embedded simulator (vLLM face, prefix
caching on): a shared-prefix workload that hits the prefix cache without it hits nothing with it
(each request's vLLM `cache_salt`), the simulator's trace and its prefix-cache counter agreeing, and
the summary sets the share the design implies (0 when busted) beside them."""

from __future__ import annotations

import json
import subprocess

import pytest

from swarm.analysis.server_metrics import read_snapshots
from tests.helpers.support import swarm_cmd

# serial: its servers answer at once, so its runs saturate both cores for seconds, and the parallel
# tier's short runs beside it got no answer (fresh-clone CI runs ci17 and ci19: 0 records in 2-4 s)
pytestmark = [pytest.mark.integration, pytest.mark.serial]


def _run(out, *extra: str):
    cmd = swarm_cmd("run", "-u", "4", "-t", "3s", "--workers", "1", "--sim-profile", "instant",
                    "--out", str(out), "--workload", "synthetic", "--input-tokens", "300",
                    "--shared-prefix-tokens", "256", "--output-tokens", "4", "--seed", "3", *extra)  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    trace = [json.loads(line) for line in (out / "sim-trace.jsonl").read_text().splitlines()]
    snaps = read_snapshots(out / "server_metrics.jsonl")
    hits = max(s.prefix_hits or 0.0 for s in snaps)
    summary = json.loads((out / "summary.json").read_text())
    return p.stdout, trace, hits, summary


def test_busted_prefixes_hit_nothing_where_the_same_run_without_it_hits(tmp_path):
    stdout, trace, hits, summary = _run(tmp_path / "kept")
    assert len(trace) > 20 and sum(t["cached_tokens"] or 0 for t in trace) > 0 and hits > 0
    assert summary["intended_prefix_share"]["synthetic"] > 0.8 and "prefix_cache_mode" not in summary
    stdout, trace, hits, summary = _run(tmp_path / "bust", "--prefix-cache", "bust")
    assert len(trace) > 20 and all((t["cached_tokens"] or 0) == 0 for t in trace) and hits == 0
    assert summary["intended_prefix_share"] == {"synthetic": 0.0} and summary["prefix_cache_mode"] == "bust"
    assert "prefix-cache hit share the design implies: synthetic 0.0% (--prefix-cache bust" in stdout
