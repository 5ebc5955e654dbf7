"""`make bench`'s harness in its tiny mode (benchmarks/run.py --quick: a few seconds a phase, no
vllm-bench, no scale-out): it runs, prints the table and writes bench-results.json with the keys
the issue asks for and sane values. Not a timed test: no figure is held to a target here."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from tests.helpers.support import REPO

pytestmark = pytest.mark.integration

KEYS = (
    "swarm_chunks_per_s",
    "vllm_bench_chunks_per_s",
    "ratio",
    "ttft_err_p99_ms_at_50",
    "ttft_err_p99_ms_at_90",
    "worker_peak_rss_mb",
)


@pytest.mark.serial
def test_quick_benchmark_writes_its_results(tmp_path):
    results = tmp_path / "bench-results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "run.py"),
            "--quick",
            "--out",
            str(tmp_path / "runs"),
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(results.read_text())
    assert set(KEYS) <= set(r)
    assert (
        r["swarm_chunks_per_s"] > 1000
        and r["swarm_requests_per_s"] * 60 < r["swarm_chunks_per_s"] < r["swarm_requests_per_s"] * 70
    )  # 64 output tokens a request, one chunk each
    assert r["vllm_bench_chunks_per_s"] is None and r["ratio"] is None and "skipped" in r["ratio_reason"]
    assert 0 <= r["ttft_err_p50_ms_at_50"] <= r["ttft_err_p99_ms_at_50"]
    assert 0 <= r["ttft_err_p99_ms_at_90"] < 10_000
    assert 20 < r["worker_peak_rss_mb"] < 2000
    levels = r["capacity"]["swarm"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and all(lv["cpu_percent"] > 0 for lv in levels)
    for f in r["fidelity"]:  # every ok request matched its simulator trace line by request id
        assert f["client"] == "swarm" and f["n"] > 100 and f["unmatched"] == 0
    out = proc.stdout
    assert (
        "drive capacity, chunks/s (client CPU <= 90%)" in out
        and "TTFT error p99 ms at 90% of capacity" in out
    )
    assert "load average before" in out and "targets:" in out


@pytest.mark.serial
def test_a_terminated_benchmark_leaves_no_process_behind(tmp_path):
    """SIGTERM to `benchmarks/run.py` (what `timeout` or a stopped `make bench` sends) stops the
    simulator and the swarm it started, as Ctrl-C does."""
    import signal

    import psutil

    from tests.helpers.support import wait_for

    bench = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick", "--out", str(tmp_path / "runs"),
         "--results", str(tmp_path / "r.json")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    me = psutil.Process(bench.pid)
    seen: list[psutil.Process] = []

    def swarm_running() -> bool:  # the simulator and a Locust master are up: mid-benchmark
        seen[:] = me.children(recursive=True)
        cmds = [" ".join(p.cmdline()) for p in seen if p.is_running()]
        return any(" sim " in c for c in cmds) and any("locust" in c for c in cmds)

    try:
        wait_for(swarm_running, 120, "the benchmark's simulator and Locust")
        bench.send_signal(signal.SIGTERM)  # the harness alone, not its process group
        assert bench.wait(timeout=60) != 0
        _gone, alive = psutil.wait_procs(seen, timeout=30)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
    finally:
        for p in [me, *seen]:
            with contextlib.suppress(psutil.Error):
                p.kill()
