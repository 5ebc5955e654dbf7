"""How `swarm run` stops, and what it leaves (issue 25): at the default --stop-timeout a Ctrl-C or
SIGTERM loses nothing, a second Ctrl-C cuts the requests in flight and still records each, a
SIGKILLed `swarm run` leaves no process behind, a second run never writes into the first one's
directory, and a run whose every worker quit at start fails with the worker's reason.

Against `swarm sim --trace` with the slow-decode profile (20 ms a step: requests are in flight when
the stop comes); `reconcile` (tests/integration/test_stop_modes.py) holds the records to the
simulator's trace and counters.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.helpers.sim_http import scrape
from tests.helpers.support import REPO, sim_server, swarm_cmd, wait_for
from tests.integration.test_faults import locust_env, run_children, trace_lines
from tests.integration.test_stop_modes import MAX_TOKENS, PROFILE, prompt_file, reconcile

pytestmark = pytest.mark.integration


@pytest.fixture
def sim(tmp_path):
    with sim_server(tmp_path, "--profile", str(PROFILE)) as s:
        yield s


def run_cmd(out: Path, prompts: Path, *args: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    return swarm_cmd(
        "run", "--workers", "2", "-u", "4", "-t", "120s", "--workload", "custom", "--out", str(out), *args,
        "--", "--prompt-file", str(prompts), "--max-tokens", str(max_tokens), "--ignore-eos",
    )  # fmt: skip


def launch(cmd: list[str], log: Path) -> subprocess.Popen:
    """`swarm run` in a session of its own: a signal reaches it alone, as a terminal's would."""
    with open(log, "wb") as f:
        return subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, env=locust_env()
        )


def parquet_records(out: Path) -> list[dict]:
    return pq.read_table(out / "requests.parquet").to_pylist()


def users_running(out: Path) -> bool:
    log = out / "master.log"
    return log.exists() and "All users spawned" in log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_stop_at_the_default_stop_timeout_loses_nothing(tmp_path, sim, sig):
    """The issue's run: SIGTERM after some requests, `--stop-timeout` left at its default (30 s).
    The requests in flight (2 s each) finish, the simulator stays up for them, and the trace, the
    server's counters, requests.parquet and summary.json all say the same."""
    out = tmp_path / "run"
    p = launch(run_cmd(out, prompt_file(tmp_path / "prompts.jsonl"), "--host", sim.url), tmp_path / "run.log")
    try:
        wait_for(lambda: trace_lines(sim.trace) >= 8, 90, "requests to finish")
        p.send_signal(sig)
        code = p.wait(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    text = (tmp_path / "run.log").read_text()
    assert code == 130 and "Traceback" not in text, text[-3000:]
    assert "requests in flight may finish for up to 30 s" in text, text[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    outcomes = reconcile(sim.trace, scrape(sim.url), parquet_records(out), summary)
    assert outcomes["cancelled"] == 0 and outcomes["ok"] == trace_lines(sim.trace)  # each finished
    assert summary["drain"]["requests"] >= 1  # in flight at the stop, finished after it


@pytest.mark.serial
def test_a_second_ctrl_c_cuts_now_and_records_what_it_cut(tmp_path, sim):
    """Answers of 1,000 tokens take 20 s; Ctrl-C, then Ctrl-C again: the run ends within seconds
    (not after the answers or the 30 s stop timeout), every request it cut is one `cancelled`
    record, and the server saw each of them aborted."""
    out = tmp_path / "run"
    cmd = run_cmd(out, prompt_file(tmp_path / "prompts.jsonl"), "--host", sim.url, max_tokens=1000)
    p = launch(cmd, tmp_path / "run.log")
    try:
        wait_for(lambda: users_running(out), 90, "the users to start")
        time.sleep(3)  # every user has a request streaming
        p.send_signal(signal.SIGINT)
        time.sleep(2)
        cut = time.monotonic()
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=60)
        took = time.monotonic() - cut
    finally:
        if p.poll() is None:
            p.kill()
    text = (tmp_path / "run.log").read_text()
    assert code == 130 and "cutting the requests in flight now" in text, text[-3000:]
    assert took < 15, took  # the answers had ~15 s left, the stop timeout 28 s
    records = parquet_records(out)
    trace = [json.loads(line) for line in sim.trace.read_text().splitlines()]
    assert len(records) == len(trace) >= 4
    assert Counter(r["outcome"] for r in records) == {"cancelled": len(trace)}
    assert {t["finish_reason"] for t in trace} == {"abort"}
    assert {r["request_id"] for r in records} == {t["id"] for t in trace}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"]["requests"] == summary["total"]["cancelled"] == len(trace)


@pytest.mark.parametrize("embedded", [False, True], ids=["host", "embedded-sim"])
def test_a_sigkilled_swarm_run_leaves_no_process_behind(tmp_path, sim, embedded):
    """SIGKILL gives `swarm run` no chance to stop anything: its children stop themselves (the
    kernel's parent-death signal), the server is loaded no further, the embedded simulator exits."""
    out = tmp_path / "run"
    args = ["--sim-profile", str(PROFILE)] if embedded else ["--host", sim.url]
    p = launch(run_cmd(out, prompt_file(tmp_path / "prompts.jsonl"), *args), tmp_path / "run.log")
    trace = out / "sim-trace.jsonl" if embedded else sim.trace
    try:
        children = run_children(p.pid)
        assert ("sim" in children) == embedded, children
        wait_for(lambda: trace_lines(trace) >= 4, 90, "requests")
    finally:
        p.kill()
        p.wait()
    _, alive = psutil.wait_procs(list(children.values()), timeout=45)
    assert not alive, [(a.pid, a.cmdline()[:6]) for a in alive]
    if not embedded:  # nothing loads the (still running) server any more
        served = trace_lines(trace)
        time.sleep(3)
        assert trace_lines(trace) == served
        assert scrape(sim.url).get(("vllm:num_requests_running", ()), 0) == 0


def test_a_second_run_into_the_same_out_is_refused_or_replaces_it(tmp_path, sim):
    """The issue: a second run into the same --out printed both runs' records under its own
    summary. Refused (one line, exit 2, the first run untouched); with --overwrite, the directory
    holds the second run only."""
    out = tmp_path / "run"
    prompts = prompt_file(tmp_path / "prompts.jsonl")

    def run(*args: str) -> subprocess.CompletedProcess:
        cmd = [*run_cmd(out, prompts, "--host", sim.url, *args)]
        cmd[cmd.index("120s")] = "6s"
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=locust_env(), timeout=180)

    first = run()
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    first_ids = {r["request_id"] for r in parquet_records(out)}
    first_run = json.loads((out / "summary.json").read_text())["run_id"]
    refused = run()
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"swarm run: error: --out {out} already holds run {first_run}: give a new directory, "
        "or --overwrite to replace it"
    ]
    assert {r["request_id"] for r in parquet_records(out)} == first_ids
    second = run("--overwrite")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    records = parquet_records(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_id"] != first_run
    assert len(records) == summary["total"]["requests"] > 0
    assert not first_ids & {r["request_id"] for r in records}
    assert f"swarm: {len(records)} request records" in second.stdout


def test_a_run_whose_every_worker_quits_at_start_fails_with_the_workers_reason(tmp_path):
    """Each worker refuses a tokenizer file it cannot load (exit 2, one line): `swarm run` ends the
    run at once and exits 2 with that line, not 0 with an empty table."""
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": a tokenizer')
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "--workers", "2", "-u", "2", "-t", "120s", "--workload", "synthetic",
                    "--out", str(out), "--", "--tokenizer", str(bad))  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=locust_env(), timeout=180)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert time.monotonic() - started < 90  # not the whole -t
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("swarm: worker-")]
    assert len(lines) == 2, done.stderr
    assert all(f"--tokenizer {bad}: cannot load tokenizer.json" in ln for ln in lines), lines
    assert "every worker has quit" in done.stderr and "Traceback" not in done.stderr + done.stdout


def test_a_run_in_which_no_request_completed_fails_saying_why(tmp_path):
    """Every stream stalls past the run's end and --stop-timeout 0 cuts each: requests were sent
    and none answered, which exited 0 with a table of dashes (issue 41)."""
    p = subprocess.run(
        swarm_cmd("run", "--sim-profile", "instant", "--sim-arg=--fault=stall=1", "--sim-arg=--stall=60s",
                  "-t", "2s", "-u", "2", "--workers", "1", "--stop-timeout", "0", "--out", str(tmp_path / "o")),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    (line,) = [x for x in p.stdout.splitlines() if x.startswith("swarm: no request completed: ")]
    assert "cancelled (cancelled: still in flight at the stop" in line
