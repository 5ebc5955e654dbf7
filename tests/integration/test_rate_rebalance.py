"""Open loop over a changing set of workers: the stage's rate stays the stage's.

One `--rate` stage at RATE req/s (constant arrivals) on a master with 2 workers; 2 more join in
the middle of it, then one of the first quits. After each change the master splits the rate over
the workers there are now (swarm/live/shape.py `share_rate`), so the requests sent per second stay
at RATE: before the fix, the 2 that joined took RATE/4 each while the first 2 kept RATE/2 (1.5 x
RATE), and after a quit the rest kept their share (0.75 x RATE). Counted by schedule: each
request's slot is its send time less its send lag, so a worker starved of CPU for a moment (new
processes starting on a busy machine) that then catches up does not move the count. About 75 s.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from pathlib import Path

import pytest

from swarm.orchestrate.commands import locust_command
from tests.helpers.support import free_port, sim_server, start, wait_for
from tests.integration.test_many_workers import gauge

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

RATE = 20.0
STAGE_S = 60


def slots(run: Path) -> list[float]:
    """Every request's scheduled time (wall clock): sent at start_wall_s, send_lag_s late."""
    from swarm.core import recordfile

    t = recordfile.read_table(run / "records").select(["start_wall_s", "send_lag_s"]).to_pydict()
    return sorted(s - (lag or 0.0) for s, lag in zip(t["start_wall_s"], t["send_lag_s"], strict=True))


def rate_between(times: list[float], start: float, end: float) -> float:
    return sum(start <= t < end for t in times) / (end - start)


def test_the_rate_is_shared_again_when_workers_join_and_quit(tmp_path: Path) -> None:
    port, prom = free_port(), free_port()
    locust = locust_command()
    with sim_server(tmp_path, "--profile", "instant") as sim:
        common = ["--host", sim.url, "--workload", "short_qa", "--max-tokens", "8"]
        common += ["--swarm-out", str(tmp_path / "run"), "--run-id", "rebalance"]
        master_cmd = [*locust, "--master", "--headless", "--master-bind-host", "127.0.0.1"]
        master_cmd += ["--master-bind-port", str(port), "--expect-workers", "2", "-u", "40"]
        master_cmd += ["--rate", f"{RATE:g}", "--arrivals", "constant", "--stage-time", f"{STAGE_S}s"]
        master_cmd += ["--prometheus-port", str(prom), "--stop-timeout", "10s"]
        worker_cmd = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port), *common]
        metrics = f"http://127.0.0.1:{prom}/metrics"
        marks: dict[str, float] = {}
        with contextlib.ExitStack() as stack:
            master = stack.enter_context(start([*master_cmd, *common], tmp_path / "master.log"))
            first = [stack.enter_context(start(worker_cmd, tmp_path / f"worker-{i}.log")) for i in range(2)]
            wait_for(lambda: (gauge(metrics, "swarm_requests_total") or 0) > 0, 60, "the first requests")
            time.sleep(12)
            marks["two"] = time.time()
            for i in range(2):
                stack.enter_context(start(worker_cmd, tmp_path / f"late-{i}.log"))
            wait_for(lambda: gauge(metrics, "swarm_workers") == 4, 30, "the late workers")
            marks["four"] = time.time()
            time.sleep(12)
            marks["quit"] = time.time()
            first[0].popen.terminate()  # a worker that quits: Locust tells the master
            wait_for(lambda: gauge(metrics, "swarm_workers") == 3, 30, "the quit")
            marks["three"] = time.time()
            time.sleep(12)
            marks["end"] = time.time()
            # the last window is measured: end the run as `swarm run` does on SIGTERM (the stage's
            # remaining ~18 s would add nothing any assertion reads)
            master.popen.send_signal(signal.SIGTERM)
            assert master.wait(timeout=STAGE_S + 90) == 0, master.output()[-3000:]
        times = slots(tmp_path / "run")
    # each window starts 2 s after its change: the new shares reach the workers within a tick
    two = rate_between(times, marks["two"] - 10, marks["two"])
    four = rate_between(times, marks["four"] + 2, marks["quit"])
    three = rate_between(times, marks["three"] + 2, marks["end"])
    assert two == pytest.approx(RATE, rel=0.15), (two, four, three)
    assert four == pytest.approx(RATE, rel=0.15), (
        f"4 workers: {four:.1f} req/s, not {RATE:g} (2 workers {two:.1f})"
    )
    assert three == pytest.approx(RATE, rel=0.15), f"3 workers: {three:.1f} req/s, not {RATE:g}"


def test_a_stage_change_sends_no_burst(tmp_path: Path) -> None:
    """Three stages at the same rate send what one would, and nothing after the stop: users queued
    at the arrival gate when a stage began used to take the old schedule's slots while the new
    one's fell behind, then left in one burst (529 requests where 270 were due at 30 req/s x 3 x
    3 s); and users waiting for their slot when the stop began sent once more (42 requests after
    the last stage's end at 20 req/s with -u 40)."""
    from tests.helpers.support import swarm_cmd

    stages, stage_s = 3, 5
    with sim_server(tmp_path, "--profile", "instant") as sim:
        cmd = swarm_cmd("run", "--host", sim.url, "--workers", "1", "--out", str(tmp_path / "run"),
                        "--workload", "short_qa", "-u", "40", "--rate", ",".join([f"{RATE:g}"] * stages),
                        "--arrivals", "constant", "--stage-time", f"{stage_s}s", "--", "--max-tokens", "8")  # fmt: skip
        import subprocess

        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        sent = sum(1 for line in sim.trace.read_text().splitlines() if line.strip())
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["total"]["requests"] == sent
    due = RATE * summary["duration_s"]  # the load window, as run (the stop ends it)
    assert sent == pytest.approx(due, rel=0.05), (
        sent,
        due,
        [s["total"]["requests"] for s in summary["stages"]],
    )
