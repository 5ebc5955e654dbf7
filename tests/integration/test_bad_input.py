"""Bad input, every door: one line saying what is wrong and how to fix it, exit 2, no traceback.

Doors: `swarm run` (its own options, the simulator's via --sim-profile/--sim-arg, and the Locust
and workload options passed after --), a plain `locust -f` with the swarm's user, and `swarm sim`.
Already covered elsewhere and not repeated: swarm run's --workers/-u/-t/--host/--workload/--slo/
-r/--run-id (test_run_options), Locust's --workload/weights/--rag-*/custom without a file/
--ignore-eos and a bad prompt-file line (test_user_sim), a malformed --slo on a Locust master
(test_plugin_distributed), the simulator's option units (test_sim_units).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.support import HELPERS, REPO, swarm_cmd

NOT_UTF8 = b'{"prompt": "caf\xe9"}\n'


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(NOT_UTF8)
    return {"latin1": bad, "missing": tmp_path / "nope.jsonl"}


def one_line_exit_2(p: subprocess.CompletedProcess, words: str) -> None:
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    errors = [line for line in p.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, p.stderr[-3000:]
    assert words in errors[0], errors[0]


RUN_CASES = [
    # swarm run's own options not in test_run_options
    (["--sweep", "10,20", "--stage-time", "0s"], "--stage-time must be > 0"),
    (["--sweep", "10,x"], "bad --sweep '10,x'"),
    (["--sweep", "10", "--stage-time", "10s", "--warmup", "10s"], "--warmup (10s) must be shorter"),
    (["-u", "0"], "-u/--users must be at least 1"),
    (["--host", "http://"], "is not a URL: use e.g. http://127.0.0.1:8000"),
    (["--prometheus-port", "70000"], "--prometheus-port must be 1-65535"),
    (["--stop-timeout", "soon"], "bad time 'soon'"),
    (["--server-metrics", "ftp:x"], "is not a URL"),
    (["--grafana-url", "notaurl"], "is not a URL"),
    (["--workload", "custom"], "needs --prompt-file"),
    (["--workload", "custom", "--", "--prompt-file", "{missing}"], "no such file"),
    (["--workload", "custom", "--", "--prompt-file", "{latin1}"], "cannot read it ('utf-8' codec"),
    # after --, an option swarm run sets itself would be overridden by its value: refused, named
    (["--", "--max-tokens", "8", "--trace-max-lag=5s"], "--trace-max-lag after --: it is a swarm run option"),
    (["--", "-u", "4"], "-u after --: it is a swarm run option, give it before --"),
    (["--", "--csv", "x"], "--csv after --: swarm run sets it itself"),
    # the embedded simulator's
    (["--sim-profile", "nosuch"], "unknown profile 'nosuch'"),
    (["--sim-arg=--fault=bogus=0.1"], "expected KIND=RATE"),
    (["--sim-arg=--nope"], "unknown simulator option '--nope'"),
]


@pytest.mark.parametrize("args, words", RUN_CASES, ids=[" ".join(a) for a, _ in RUN_CASES])
def test_swarm_run_refuses_before_starting_anything(tmp_path, files, args, words):
    args = [a.format(**files) for a in args]
    p = subprocess.run(
        swarm_cmd("run", "--out", str(tmp_path / "o"), *args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    one_line_exit_2(p, words)
    assert not (tmp_path / "o").exists()  # nothing started, nothing written


PASSED_TO_LOCUST = [
    (["--max-tokens", "-5"], "--max-tokens must be at least 1 (got -5)"),
    (["--request-timeout", "-1"], "--request-timeout must be > 0 seconds"),
    (["--request-deadline", "-1"], "--request-deadline must be >= 0 seconds"),
    (["--thinking-ratio", "2"], "--thinking-ratio must be between 0 and 1"),
    (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args, words", PASSED_TO_LOCUST, ids=[" ".join(a) for a, _ in PASSED_TO_LOCUST])
def test_swarm_run_says_what_locust_refused(tmp_path, args, words):
    """Options after -- are Locust's and the user's: the master refuses them at start-up; swarm run
    stops what it started and passes the master's one line on."""
    p = subprocess.run(
        swarm_cmd("run", "--out", str(tmp_path / "o"), "-t", "2s", "--sim-profile", "instant", "--", *args),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    one_line_exit_2(p, words)
    assert p.stderr.startswith("swarm run: error: ")


LOCUST_CASES = [
    (["--host", "localhost:8000"], "--host 'localhost:8000' is not a URL: use e.g. http://127.0.0.1:8000"),
    (["--request-timeout", "0"], "--request-timeout must be > 0 seconds (got 0.0)"),
    (["--request-deadline", "-1"], "--request-deadline must be >= 0 seconds, 0 for none"),
    (["--request-deadline", "x"], "argument --request-deadline: invalid float value: 'x'"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1 (got 0)"),
    (["--thinking-ratio", "-0.5"], "--thinking-ratio must be between 0 and 1"),
    (["--rag-passages", "-1"], "--rag-passages must be 1-32"),
    (["--endpoint", "nope"], "invalid choice: 'nope'"),
    (["--workload", "custom", "--prompt-file", "{missing}"], "no such file"),
    (["--workload", "custom", "--prompt-file", "{latin1}"], "cannot read it ('utf-8' codec"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args, words", LOCUST_CASES, ids=[" ".join(a) for a, _ in LOCUST_CASES])
def test_plain_locust_with_the_swarm_user_refuses_at_start(tmp_path, files, args, words):
    args = [a.format(**files) for a in args]
    host = [] if "--host" in args else ["--host", "http://127.0.0.1:9"]
    env = {**os.environ, "SWARM_TEST_RECORDS": str(tmp_path / "records.jsonl")}
    p = subprocess.run([sys.executable, "-m", "locust", "-f", str(HELPERS / "locust_records.py"), "--headless",
                        "-u", "1", "-t", "2s", *host, *args], capture_output=True, text=True, timeout=60, cwd=REPO,
                       env=env)  # fmt: skip
    one_line_exit_2(p, words)
    assert not (tmp_path / "records.jsonl").read_bytes()  # no request was sent


SIM_CASES = [
    (["--fault", "cut=2"], "RATE must be in [0, 1]"),
    (["--fault", "cut=0.6", "--fault", "stall=0.6"], "must add up to at most 1"),
    (["--stall-s", "-1"], "--stall-s must be >= 0"),
    (["--utf8-split", "1.5"], "--utf8-split 1.5: must be in [0, 1)"),
    (["--port", "70000"], "--port 70000: must be in 0..65535"),
    (["--api-key="], "--api-key: must not be empty"),
]


@pytest.mark.parametrize("args, words", SIM_CASES, ids=[" ".join(a) for a, _ in SIM_CASES])
def test_swarm_sim_refuses(args, words):
    p = subprocess.run(swarm_cmd("sim", *args), capture_output=True, text=True, timeout=60, cwd=REPO)
    one_line_exit_2(p, words)


def test_swarm_report_on_a_directory_that_is_not_a_run(tmp_path):
    p = subprocess.run(
        swarm_cmd("report", str(tmp_path)), capture_output=True, text=True, timeout=60, cwd=REPO
    )
    one_line_exit_2(p, "holds no run")
