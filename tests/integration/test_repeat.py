"""`swarm run --repeat 2`: the plan twice, each a full run directory, then the across-run mean and
interval per stage in DIR/repeat.json and on stdout; `swarm compare` of the two marks the noise."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.helpers.support import sim_server, swarm_cmd

pytestmark = pytest.mark.integration


def test_repeat_runs_the_plan_n_times_and_reports_across_runs(tmp_path):
    out = tmp_path / "rep"
    with sim_server(tmp_path, "--profile", "instant", trace=False) as s:
        cmd = swarm_cmd("run", "--host", s.url, "--workers", "1", "-u", "2", "--sweep", "1,2", "--stage-time", "3s",
                        "--repeat", "2", "--out", str(out), "--workload", "short_qa", "--goodput", "e2e<=10s",
                        "--", "--max-tokens", "8")  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summaries = [json.loads((out / f"repeat-{i}" / "summary.json").read_text()) for i in (1, 2)]
    assert summaries[0]["run_id"].endswith("-r1") and summaries[1]["run_id"].endswith("-r2")
    result = json.loads((out / "repeat.json").read_text())
    assert result["runs"] == 2 and set(result["stages"]) == {"0", "1", "run"}
    qps = result["stages"]["1"]["qps"]
    assert qps["values"] == [s["stages"][1]["total"]["qps"] for s in summaries]
    assert qps["ci"][0] <= qps["mean"] <= qps["ci"][1]
    assert result["stages"]["run"]["goodput"]["values"] == [s["total"]["goodput"]["rate"] for s in summaries]
    assert "across 2 runs: mean ± 95% interval" in p.stdout

    c = subprocess.run(swarm_cmd("compare", str(out / "repeat-1"), str(out / "repeat-2")),
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert c.returncode == 0, c.stderr[-2000:]
    assert re.search(r"^\s*\d+\s+QPS\s", c.stdout, re.M) and re.search(
        r"^\s*\d+\s+good/s\s", c.stdout, re.M
    ), c.stdout
    assert "judged changes marked" in c.stdout  # each change's interval, and the chance note
    assert "master_bind_port" not in c.stdout and "prometheus_port" not in c.stdout  # ports: no difference
    both = subprocess.run(
        swarm_cmd("compare", str(out), str(out)), capture_output=True, text=True, timeout=120
    )
    assert (
        both.returncode == 0 and "means across runs" in both.stdout and "judged changes marked" in both.stdout
    )
