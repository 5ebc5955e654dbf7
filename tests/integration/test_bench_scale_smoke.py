"""`make bench-scale`'s two benchmarks in tiny modes: benchmarks/master_scale.py records a real run
and replays it from a few fake workers over Locust's protocol to a real master (the probe request
must reach /metrics); benchmarks/streams_10k.py refuses, with one line and exit 2, a stream count
the file-descriptor limit cannot hold, before starting anything. Not timed: no figure is held to
a target here (the figures are `make bench-scale`'s)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from tests.helpers.support import REPO

pytestmark = pytest.mark.integration


@pytest.mark.serial
def test_master_scale_replays_reports_to_a_real_master(tmp_path):
    results = tmp_path / "scale.json"
    cmd = [sys.executable, str(REPO / "benchmarks/master_scale.py"), "--workers", "4", "--record-s", "8"]
    cmd += ["--warmup-s", "2", "--measure-s", "7", "--no-worst-case", "--out", str(tmp_path / "runs")]
    proc = subprocess.run(
        [*cmd, "--results", str(results)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(results.read_text())
    [level] = r["levels"]
    assert level["workers"] == 4 and level["reports_per_s"] == pytest.approx(4 / 3)
    assert level["report_to_metrics_ms"], "the probe's request reached /metrics"
    assert level["master_cpu_percent"] is not None and level["master_rss_mib"] > 10
    assert level["merge_ms_p50"] > 0 and "workload, stage" in r["reports"]


def test_streams_benchmark_refuses_what_the_fd_limit_cannot_hold(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard open-file limit here")
    args = ["--streams", str(hard + 1), "--out", str(tmp_path / "runs")]
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/streams_10k.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "open-file limit" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists(), "nothing started"
