"""`swarm run --gpu-metrics`: two GPU hosts, each a dcgm-exporter STAND-IN process (tests/helpers/
dcgm_standin.py: dcgm-exporter's documented names and labels; no GPU here), polled beside the
simulator's /metrics. The run leaves gpu_metrics.jsonl with every GPU of both hosts, the report a
GPU table per stage, and the diagnosis names the idle GPU on the second host."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from swarm.analysis.gpu_metrics import read_gpu_snapshots
from swarm.core.runfiles import GPU_METRICS
from tests.helpers.support import free_port, sim_server, start, swarm_cmd, wait_http

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def standin(tmp_path, hostname: str, util: str):
    port = free_port()
    cmd = [sys.executable, "-m", "tests.helpers.dcgm_standin", "--port", str(port), "--hostname", hostname,
           "--util", util, "--sm-active"]  # fmt: skip
    with start(cmd, tmp_path / f"dcgm-{hostname}.log") as proc:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_http(url, timeout=30, proc=proc.popen, log=proc.log)
        yield url


def test_run_polls_two_gpu_hosts_and_names_the_idle_gpu(tmp_path):
    out = tmp_path / "run"
    with contextlib.ExitStack() as stack:
        sim = stack.enter_context(sim_server(tmp_path, "--profile", "instant", trace=False))
        a = stack.enter_context(standin(tmp_path, "gpu-a", "97,98"))
        b = stack.enter_context(standin(tmp_path, "gpu-b", "96,1"))
        run = subprocess.run(
            swarm_cmd("run", "--host", sim.url, "--workers", "1", "-u", "4", "-t", "10s", "--stop-timeout", "5s",
                      "--out", str(out), "--gpu-metrics", a, "--gpu-metrics", b, "--", "--max-tokens", "16"),
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    snaps = read_gpu_snapshots(out / GPU_METRICS)
    seen = {(g.host, g.gpu) for s in snaps for g in s.gpus}
    assert seen == {("gpu-a", "0"), ("gpu-a", "1"), ("gpu-b", "0"), ("gpu-b", "1")}
    per_url = {s.url for s in snaps}
    assert per_url == {a, b}
    assert min(sum(s.url == u for s in snaps) for u in per_url) >= 5  # polled every second through the run
    found = json.loads((out / "diagnosis.json").read_text())
    idle = [f for f in found if f["kind"] == "gpu_idle"]
    assert len(idle) == 1, found
    assert "gpu-b gpu 1" in idle[0]["text"] and "gpu-a" not in idle[0]["text"].split(":")[-1]
    assert not any(f["kind"] == "gpu_busy" for f in found)  # one GPU idle: not all busy
    report = (out / "report.html").read_text()
    assert "<h2>GPUs</h2>" in report and "gpu-b gpu 1" in report and "NVIDIA H100 80GB HBM3" in report


def test_gpu_metrics_must_be_urls(tmp_path):
    run = subprocess.run(
        swarm_cmd("run", "--gpu-metrics", "http://127.0.0.1:9400/metrics,gpu-host:9400", "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .endswith("--gpu-metrics 'gpu-host:9400' is not a URL: use e.g. http://gpu-host:9400/metrics")
    ), run.stderr
