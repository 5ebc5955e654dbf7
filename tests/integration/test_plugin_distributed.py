"""swarm.live.plugin in real Locust processes: master + workers, summary totals, /metrics, SLO exit codes,
a worker killed mid-run. Users are synthetic (tests/helpers/plugin_locustfile.py): no network."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from swarm.core.records import OUTCOMES
from tests.helpers.support import HELPERS, REPO, Proc, free_port, start, wait_for

pytestmark = pytest.mark.integration
LOCUSTFILE = str(HELPERS / "plugin_locustfile.py")
LOCUST = [sys.executable, "-m", "locust", "-f", LOCUSTFILE]
REPORT_INTERVAL_S = 3.0  # a worker's report_to_master period (Locust's WORKER_REPORT_INTERVAL)


def read_sent(directory: Path) -> dict[int, list[dict]]:
    """pid -> the records that process fired."""
    return {
        int(f.stem): [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for f in sorted(directory.glob("*.jsonl"))
    }


@contextlib.contextmanager
def swarm_processes(
    tmp_path: Path,
    master_args: list[str],
    workers: int = 2,
    env: dict | None = None,
) -> Iterator[tuple[Proc, list[Proc]]]:
    master_port = free_port()
    env = {"SWARM_TEST_SENT": str(tmp_path / "sent"), **(env or {})}
    with contextlib.ExitStack() as stack:
        master = stack.enter_context(
            start(
                [
                    *LOCUST,
                    "--master",
                    "--headless",
                    "--master-bind-host",
                    "127.0.0.1",
                    "--master-bind-port",
                    str(master_port),
                    "--expect-workers",
                    str(workers),
                    "--expect-workers-max-wait",
                    "60",
                    "--only-summary",
                    *master_args,
                ],
                tmp_path / "master.log",
                env=env,
            )
        )
        procs = [
            stack.enter_context(
                start(
                    [
                        *LOCUST,
                        "--worker",
                        "--master-host",
                        "127.0.0.1",
                        "--master-port",
                        str(master_port),
                        "--swarm-out",
                        str(tmp_path / "out"),
                    ],
                    tmp_path / f"worker-{i}.log",
                    env=env,
                )
            )
            for i in range(workers)
        ]
        yield master, procs


def first_sent_at(path: Path) -> float | None:
    """When the process writing `path` (plugin_locustfile.py's sent records) fired its first record."""
    with contextlib.suppress(FileNotFoundError), open(path) as f:
        line = f.readline()
        if line.endswith("\n"):
            return json.loads(line)["sent_at"]
    return None


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def promtool_check(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing: run scripts/install-system-deps.sh")
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def test_master_summary_equals_what_the_workers_sent(tmp_path):
    prom = free_port()
    out = tmp_path / "out"
    args = [
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "6s",
        "--swarm-out",
        str(out),
        "--prometheus-port",
        str(prom),
        "--run-id",
        "it-1",
        "--slo",
        "ttft_p99<=30s,error_rate<=50%",
    ]
    with swarm_processes(tmp_path, args) as (master, _):
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline and "swarm_ttft_seconds_count{" not in text:
            with contextlib.suppress(OSError):
                text = fetch(f"http://127.0.0.1:{prom}/metrics")
            time.sleep(0.5)
        promtool_check(text)
        assert 'run_id="it-1"' in text and "sk-test-secret-key" not in text
        assert master.wait(timeout=90) == 0, master.output()[-3000:]
    log = master.output()
    assert "SLO PASS: total.ttft_p99 <= 30.000s (measured " in log
    assert "SLO PASS: total.error_rate" in log

    sent = [r for rs in read_sent(tmp_path / "sent").values() for r in rs]
    s = json.loads((out / "summary.json").read_text())
    # failure messages are kept as recorded (LLMUser scrubs the real key at the source: test_secrets)
    assert {e["message"] for kept in s["errors"].values() for e in kept} == {"sk-test-secret-key rejected"}
    assert s["run_id"] == "it-1" and s["workers"] == 2 and not s["degraded"]
    assert s["slo"] and all(v["ok"] for v in s["slo"])
    for name in ("total", "short_qa", "chat"):
        mine = [r for r in sent if name == "total" or r["workload"] == name]
        block = s[name]
        assert block["requests"] == len(mine) > 0
        assert block["failures"] == {
            o.value: sum(r["outcome"] == o.value for r in mine) for o in OUTCOMES if o.failed
        }
        for key in ("prompt_tokens", "output_tokens", "reasoning_tokens"):
            assert block[key] == sum(r[key] for r in mine)
        ok = [r for r in mine if r["outcome"] == "ok"]
        for lat, values in (
            ("ttft", [r["ttft_s"] for r in ok]),
            ("e2e", [r["e2e_s"] for r in ok]),
            ("itl", [v for r in ok for v in r["itl_s"]]),
        ):
            for stat, q in (("p50", 50), ("p99", 99)):
                exact = float(np.percentile(values, q, method="lower"))
                assert abs(block[f"{lat}_s"][stat] - exact) <= 0.01 * exact, (name, lat, stat)
            assert block[f"{lat}_s"]["max"] == max(values)
    records = list((out / "records").glob("*.parquet"))
    if records:  # the lead's recorder: every record the workers fired is on disk
        import pyarrow.parquet as pq

        assert sum(pq.read_metadata(p).num_rows for p in records) == len(sent)


def test_slo_failure_exits_nonzero_with_the_measured_value(tmp_path):
    with start(
        [
            *LOCUST,
            "--headless",
            "-u",
            "2",
            "-r",
            "2",
            "-t",
            "2s",
            "--only-summary",
            "--slo",
            "ttft_p99<=1ms,error_rate<=100%",
        ],
        tmp_path / "local.log",
    ) as p:
        code = p.wait(timeout=60)
    log = p.output()
    assert code == 1, log[-2000:]
    assert "SLO FAIL: total.ttft_p99 <= 1.0ms (measured " in log
    assert "SLO PASS: total.error_rate <= 100.00%" in log


def test_malformed_slo_is_one_line_and_exit_2(tmp_path):
    p = subprocess.run(
        [*LOCUST, "--headless", "-u", "1", "-t", "2s", "--slo", "ttft_p99<=fast"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "swarm: error: bad SLO 'ttft_p99<=fast': expected [WORKLOAD.]METRIC OP VALUE[ms|s|%], "
        "e.g. ttft_p99<=800ms"
    ], p.stderr
    assert "Traceback" not in p.stderr + p.stdout


@pytest.mark.serial
def test_killed_worker_marks_the_run_degraded_and_loses_at_most_one_interval(tmp_path):
    out = tmp_path / "out"
    # The run ends on its own; it is long enough for a slow start-up, the kill, and the master
    # noticing the missing heartbeats (~3-5 s) while it still runs, on a busy machine too.
    args = ["-u", "4", "-r", "4", "-t", "30s", "--swarm-out", str(out)]
    with swarm_processes(tmp_path, args) as (master, workers):
        victim = workers[0]
        victim_file = tmp_path / "sent" / f"{victim.popen.pid}.jsonl"

        def victim_ran_two_intervals() -> bool:
            first = first_sent_at(victim_file)
            return first is not None and time.time() - first > 2 * REPORT_INTERVAL_S + 1

        # kill once the victim has fired records for two report intervals, however long the start-up
        # took (not after a fixed sleep): its records of the first interval have surely been reported
        wait_for(victim_ran_two_intervals, 90, "the victim to fire records for two report intervals")
        assert master.popen.poll() is None, master.output()[-3000:]
        victim.signal(signal.SIGKILL)
        killed_at = time.time()
        victim.wait(timeout=10)
        # the master marks it degraded from its heartbeats, during the run (not at the end for want
        # of a final report): wait for that with a generous deadline rather than a fixed window
        wait_for(
            lambda: "missed heartbeats" in master.output() or master.popen.poll() is not None,
            60,
            "the master to notice the killed worker",
        )
        assert "missed heartbeats" in master.output(), master.output()[-3000:]
        assert master.wait(timeout=90) == 0, master.output()[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["degraded"] is True and len(s["degraded_workers"]) == 1, s["degraded_workers"]
    d = s["degraded_workers"][0]
    assert d["reason"] == "missed heartbeats" and d["detected_at"] and d["last_report_at"]
    assert "swarm: run degraded: worker" in master.output()

    sent = read_sent(tmp_path / "sent")
    victim_sent = sent.pop(victim.popen.pid)
    survivor_total = sum(len(rs) for rs in sent.values())
    counted = s["total"]["requests"]
    # the victim's records up to one report interval (3 s, plus scheduling slack) before the kill were sent
    surely_reported = sum(r["sent_at"] < killed_at - (REPORT_INTERVAL_S + 1.0) for r in victim_sent)
    assert survivor_total + surely_reported <= counted <= survivor_total + len(victim_sent)
    assert surely_reported > 0


def test_interrupted_run_loses_nothing(tmp_path):
    """SIGTERM to the workers, then the master (what `swarm run` does on Ctrl-C): every record counts."""
    out = tmp_path / "out"
    with swarm_processes(tmp_path, ["-u", "4", "-r", "4", "-t", "120s", "--swarm-out", str(out)]) as (
        master,
        workers,
    ):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(read_sent(tmp_path / "sent")) < 2:
            time.sleep(0.5)
        time.sleep(4)
        for w in workers:
            w.signal(signal.SIGTERM)
        time.sleep(0.2)
        master.signal(signal.SIGTERM)
        assert master.wait(timeout=60) == 0, master.output()[-3000:]
        for w in workers:
            w.wait(timeout=30)
    sent = [r for rs in read_sent(tmp_path / "sent").values() for r in rs]
    s = json.loads((out / "summary.json").read_text())
    assert s["total"]["requests"] == len(sent) > 0 and not s["degraded"]
