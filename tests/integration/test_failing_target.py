"""Issue 25 item 9: a failing target is not hammered, and `--abort-on` ends a run against it.

Real processes only: the always-401 server of tests/helpers/fault_servers.py (`echo_auth`: every
completion is answered 401 at once, each logged as `REQ fault-N`), real Locust, `swarm run`.
Before the backoff, 4 closed-loop users sent ~44,000 requests in 8 s to this server (5,500/s).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from swarm.load.backoff import BACKOFF_CAP_S
from swarm.orchestrate.commands import locust_command
from tests.helpers.fault_servers import fault_server, received
from tests.helpers.support import REPO, swarm_cmd

pytestmark = pytest.mark.serial


def env_without_key() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return env


def records_of(out: Path) -> list[dict]:
    from swarm.core.recordfile import read_table

    return read_table(out / "records").to_pylist()


def run_locust(out: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [*locust_command(), "--headless", "--only-summary",
           "--host", url, "--model", "m", "--workload", "short_qa", "--swarm-out", str(out), *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO, env=env_without_key())


def test_closed_loop_users_back_off_after_failures_and_open_loop_keeps_its_rate(tmp_path):
    """Closed loop, 4 users for 6 s against a target that fails every request at once: each user
    pauses after each failure (at least BACKOFF_CAP_S / 2 once failures are in a row), so the
    server gets at most users * seconds / (cap / 2) * 1.5 requests, each recorded once. Open loop at
    a constant 20/s: no pause, the schedule is the load (about 20/s, not fewer, not more)."""
    users, seconds = 4, 6
    with fault_server(tmp_path, "echo_auth") as (url, log):
        p = run_locust(tmp_path / "closed", url, "-u", str(users), "-r", str(users), "-t", f"{seconds}s")
        closed = received(log)
        p_open = run_locust(
            tmp_path / "open",
            url,
            "-u", "8", "--rate", "20", "--arrivals", "constant", "--stage-time", "5s",
        )  # fmt: skip
        opened = received(log)[len(closed) :]
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-3000:]  # every request failed
    bound = users * seconds / (BACKOFF_CAP_S / 2) * 1.5
    assert 2 * users <= len(closed) <= bound, (len(closed), bound)
    records = records_of(tmp_path / "closed")
    assert sorted(r["request_id"] for r in records) == sorted(closed)  # each one recorded once
    assert {r["outcome"] for r in records} == {"http_error"}
    assert p_open.returncode == 1, p_open.stdout[-2000:] + p_open.stderr[-3000:]
    assert 70 <= len(opened) <= 101, len(opened)  # 5 s x 20/s: the backoff takes nothing off
    assert sorted(r["request_id"] for r in records_of(tmp_path / "open")) == sorted(opened)


def test_abort_on_ends_a_run_against_a_failing_target_with_its_reason_and_exit_code(tmp_path):
    """`swarm run --abort-on "error_rate>50%/5s"` (master + a worker) against the always-401 target
    with -t 60s: the master ends the run once the 5 s window is full, well before -t; the exit
    code is 3, summary.json's `aborted` and the printed table say why; every request the server
    got is recorded exactly once (cancelled if it was in flight at the stop)."""
    out = tmp_path / "run"
    with fault_server(tmp_path, "echo_auth") as (url, log):
        t0 = time.monotonic()
        p = subprocess.run(
            swarm_cmd(
                "run",
                "--host",
                url,
                "--model",
                "m",
                "--workers",
                "1",
                "-u",
                "4",
                "-t",
                "60s",
                "--workload",
                "short_qa",
                "--abort-on",
                "error_rate>50%/5s",
                "--out",
                str(out),
                # nothing else asks the target for anything: the server's count is the completions'
                "--server-metrics",
                "http://127.0.0.1:1/metrics",
            ),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env=env_without_key(),
        )
        took = time.monotonic() - t0
        got = received(log)
    assert p.returncode == 3, p.stdout[-3000:] + p.stderr[-3000:]
    assert took < 40, took  # -t was 60 s
    summary = json.loads((out / "summary.json").read_text())
    aborted = summary["aborted"]
    assert aborted["condition"] == "error_rate>50%/5s" and aborted["value"] == 1.0
    assert aborted["reason"].startswith("aborted: error_rate 100% > 50% over the last 5 s (")
    assert "requests failed: http_error: 401 invalid credentials" in aborted["reason"]
    assert aborted["reason"] in p.stdout
    assert summary["duration_s"] < 20, summary["duration_s"]
    records = records_of(out)
    assert sorted(r["request_id"] for r in records) == sorted(got)
    assert summary["total"]["requests"] == len(records) == len(got) > 0
    assert {r["outcome"] for r in records} <= {"http_error", "cancelled"}
    for log in ("master.log", "worker-0.log"):
        assert "Traceback" not in (out / log).read_text(), log


def test_abort_on_in_plain_locust_ends_a_staged_run_once(tmp_path):
    """The same breaker in plain `locust -f swarm/locustfile.py` (a local runner) during a --sweep:
    the run ends in its first stage with exit code 3 and the reason, and the users are stopped
    once (Locust refuses a second stop of a user with an exception each)."""
    out = tmp_path / "run"
    with fault_server(tmp_path, "echo_auth") as (url, log):
        p = run_locust(out, url, "--sweep", "2,4", "--stage-time", "20s", "--abort-on", "error_rate>50%/4s")
        got = received(log)
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-3000:]
    assert "Traceback" not in p.stdout + p.stderr, p.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["aborted"]["reason"].startswith("aborted: error_rate 100% > 50% over the last 4 s (")
    assert summary["aborted"]["reason"] in p.stdout
    assert [st["stage"] for st in summary["stages"]] == [0] and summary["duration_s"] < 15
    assert sorted(r["request_id"] for r in records_of(out)) == sorted(got)
