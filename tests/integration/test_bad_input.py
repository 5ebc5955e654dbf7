"""Bad input, every door: one line saying what is wrong and how to fix it, exit 2, no traceback.

Doors: `swarm run` (its own options, the simulator's via --sim-profile/--sim-arg, and the Locust
and workload options passed after --), a plain `locust -f` with the swarm's user, and `swarm sim`.
Already covered elsewhere and not repeated: swarm run's --workers/-u/-t/--host/--workload/--slo/
-r/--run-id (test_run_options), Locust's --workload/weights/--rag-*/custom without a file/
--ignore-eos and a bad prompt-file line (test_user_sim), a malformed --slo on a Locust master
(test_plugin_distributed), the simulator's option units (tests/unit/sim/: test_profile, test_faults, test_cli).

What `swarm` itself refuses before starting anything is asked of `swarm.cli.main` in this process
(tests/helpers/cli.py `run_cli`: no exception may escape it, as no traceback may reach the output),
bounded as the subprocess was (60 s: a refusal that regressed into a run fails, not hangs). Processes
are started for plain `locust -f` and for `swarm run` with options handed on to Locust (those cases
also run `python -m swarm` itself, its exit code and output as a shell sees them).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.support import HELPERS, REPO, swarm_cmd

NOT_UTF8 = b'{"prompt": "caf\xe9"}\n'
IN_PROCESS = pytest.mark.timeout(60)  # as the subprocess's timeout=60


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(NOT_UTF8)
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}\n')
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    badtools = tmp_path / "tools.json"  # a parameter whose type is no JSON Schema type
    badtools.write_text(
        '[{"type": "function", "function": {"name": "f", "parameters": '
        '{"type": "object", "properties": {"x": {"type": "str"}}}}}]'
    )
    notjson = tmp_path / "tools.txt"
    notjson.write_text("[{not json")
    return {
        "latin1": bad,
        "missing": tmp_path / "nope.jsonl",
        "trace": trace,
        "afile": afile,
        "badtools": badtools,
        "notjson": notjson,
    }


def one_line_exit_2(p: subprocess.CompletedProcess | CliResult, words: str) -> None:
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
    (["--workload", "custom", "--prompt-file", "{missing}"], "no such file"),  # before -- too
    (["--workload", "custom", "--prompt-file", "{latin1}"], "cannot read it ('utf-8' codec"),
    # after --, an option swarm run sets itself would be overridden by its value: refused, named
    (["--", "--max-tokens", "8", "--trace-max-lag=5s"], "--trace-max-lag after --: it is a swarm run option"),
    (["--", "-u", "4"], "-u after --: it is a swarm run option, give it before --"),
    (["--", "--csv", "x"], "--csv after --: swarm run sets it itself"),
    # the embedded simulator's
    (["--sim-profile", "nosuch"], "unknown profile 'nosuch'"),
    (["--sim-arg=--fault=bogus=0.1"], "expected KIND=RATE"),
    (["--sim-arg=--nope"], "unknown simulator option '--nope'"),
    # issue 25 item 7: values that passed and crashed, hung or meant nothing
    (["--rate", "inf"], "bad --rate 'inf': every rate must be a finite number > 0"),
    (["--rate", "nan"], "bad --rate 'nan': every rate must be a finite number > 0"),
    (["-r", "inf"], "-r/--spawn-rate must be > 0 and finite (got inf)"),
    (["--slo="], "empty --slo: give at least one objective"),
    (["--slo", "error_rate<=200%"], "an error rate is a share of the requests, 0-100%"),
    (["--slo", "ttft_p99<=1e999"], "the value must be a finite number"),
    (["--slo", "e2e_p99<0"], "e2e_p99 is never below 0, so this can never hold"),
    (["--goodput", "ttft<=1e999"], "the bound must be a finite number > 0"),
    (["-u", "99999999999"], "-u/--users 99999999999: each user holds a connection open"),
    (["--sweep", "10,99999999999"], "--sweep level 99999999999: each user holds a connection open"),
    (["--workers", "100000"], "--workers 100000: at most"),
    (["--host", "http://[::1"], "--host 'http://[::1' is not a URL (Invalid IPv6 URL)"),
    (["--host", "http://127.0.0.1:99999"], "is not a URL (Port out of range"),
    (
        ["--host", "http://127.0.0.1:8000/v1"],
        "give the server's base URL without /v1, e.g. http://127.0.0.1:8000",
    ),
    (["--server-metrics", "http://[::1/metrics"], "--server-metrics 'http://[::1/metrics' is not a URL"),
    (["--gpu-metrics", "http://gpu:9400/metrics,http://[::1"], "--gpu-metrics 'http://[::1' is not a URL"),
    (["--grafana-url", "http://[::1"], "--grafana-url 'http://[::1' is not a URL"),
    (["--trace-replay", "{trace}", "--trace-block-size", "-1"], "--trace-block-size must be at least 1"),
    (
        ["--workload", "synthetic", "--", "--input-tokens", "999999999999"],
        "bad --input-tokens '999999999999': at most",
    ),
    (
        ["--workload", "synthetic", "--", "--shared-prefix-tokens", "99999999999"],
        "--shared-prefix-tokens must be at most",
    ),
    (["--", "--max-tokens", "99999999999999999999"], "--max-tokens must be at most"),
    (["--out", "{afile}"], "is a file, not a directory"),
    # agent: a tools file that is no JSON Schema, or no JSON; a tool choice not among the tools
    (
        ["--workload", "agent", "--", "--tools", "{badtools}"],
        "properties.x.type 'str' is not a JSON Schema type",
    ),
    (["--workload", "agent", "--", "--tools", "{notjson}"], "not valid JSON"),
    (
        ["--workload", "agent", "--", "--tool-choice", "nosuch"],
        "--tool-choice 'nosuch': not auto, required nor",
    ),
    (["--workload", "agent", "--", "--agent-steps", "0"], "bad --agent-steps '0'"),
    (["--out", "/proc/swarm-test/o"], "cannot be written"),
]


@IN_PROCESS
@pytest.mark.parametrize("args, words", RUN_CASES, ids=[" ".join(a) for a, _ in RUN_CASES])
def test_swarm_run_refuses_before_starting_anything(tmp_path, files, args, words):
    args = [a.format(**files) for a in args]
    p = run_cli("run", "--out", str(tmp_path / "o"), *args)
    one_line_exit_2(p, words)
    assert not (tmp_path / "o").exists()  # nothing started, nothing written


PASSED_TO_LOCUST = [
    (["--max-tokens", "-5"], "--max-tokens must be at least 1 (got -5)"),
    (["--request-timeout", "-1"], "--request-timeout: bad time '-1'"),
    (["--request-deadline", "-1"], "--request-deadline: bad time '-1'"),
    (["--request-deadline", "5 min"], "--request-deadline: bad time '5 min'"),
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


BEFORE_DASHDASH = [
    (["--max-tokens", "-5"], "--max-tokens must be at least 1 (got -5)"),
    (["--max-tokens", "x"], "argument --max-tokens: invalid int value: 'x'"),
    (["--endpoint", "nosuch"], "argument --endpoint: invalid choice: 'nosuch'"),
    (["--max-tokens", "8", "--", "--max-tokens", "9"], "--max-tokens is given both before and after --"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args, words", BEFORE_DASHDASH, ids=[" ".join(a) for a, _ in BEFORE_DASHDASH])
def test_workload_options_before_dashdash_are_checked_as_after_it(tmp_path, args, words):
    """The workload options work before -- too: a bad value there is one line and exit 2 all the same."""
    p = subprocess.run(
        swarm_cmd("run", "--out", str(tmp_path / "o"), "-t", "2s", "--sim-profile", "instant", *args),
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
    (["--request-deadline", "-1"], "--request-deadline: bad time '-1'"),
    (["--request-deadline", "x"], "--request-deadline: bad time 'x'"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1 (got 0)"),
    (["--thinking-ratio", "-0.5"], "--thinking-ratio must be between 0 and 1"),
    (["--rag-passages", "-1"], "--rag-passages must be 1-32"),
    (["--endpoint", "nope"], "invalid choice: 'nope'"),
    (["--host", "http://[::1"], "--host 'http://[::1' is not a URL (Invalid IPv6 URL)"),
    (["--request-timeout", "inf"], "--request-timeout: bad time 'inf'"),
    (["--host", "http://127.0.0.1:9/v1/"], "give the server's base URL without /v1"),
    (["--workload", "custom", "--prompt-file", "{missing}"], "no such file"),
    (["--workload", "custom", "--prompt-file", "{latin1}"], "cannot read it ('utf-8' codec"),
    (["--workload", "chat", "--slo", "nowl.ttft_p99<=1s"], "no workload 'nowl' in this run (chat)"),
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
    (["--stall=-1s"], "--stall: bad time '-1s'"),
    (["--stall", "5 s"], "--stall: bad time '5 s'"),
    (["--stall-s", "nan"], "--stall: bad time 'nan'"),  # the old spelling, checked as the new
    (["--trace", "/proc/swarm-test/trace.jsonl"], "--trace /proc/swarm-test/trace.jsonl: cannot write it"),
    (["--utf8-split", "1.5"], "--utf8-split 1.5: must be in [0, 1)"),
    (["--port", "70000"], "--port 70000: must be in 0..65535"),
    (["--api-key="], "--api-key: must not be empty"),
]


@IN_PROCESS
@pytest.mark.parametrize("args, words", SIM_CASES, ids=[" ".join(a) for a, _ in SIM_CASES])
def test_swarm_sim_refuses(args, words):
    p = run_cli("sim", *args)
    one_line_exit_2(p, words)


@IN_PROCESS
def test_swarm_report_on_a_directory_that_is_not_a_run(tmp_path):
    p = run_cli("report", str(tmp_path))
    one_line_exit_2(p, "holds no run")


def _listening() -> socket.socket:
    """A socket holding a port, as another server would."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@IN_PROCESS
def test_swarm_run_refuses_a_busy_prometheus_port(tmp_path):
    """The master serves /metrics there and the live line reads it: a port another server holds
    would have the live line read that server. One line naming the port, before anything starts."""
    with _listening() as busy:
        port = busy.getsockname()[1]
        p = run_cli("run", "--out", str(tmp_path / "o"), "--prometheus-port", str(port))
    one_line_exit_2(p, f"--prometheus-port {port}: cannot listen there")
    assert not (tmp_path / "o").exists()


@pytest.mark.integration
def test_plain_locust_master_refuses_a_busy_prometheus_port(tmp_path):
    """Plain `locust -f` with --prometheus-port busy: exit 2 with one line, not a log line and a run."""
    env = {**os.environ, "SWARM_TEST_RECORDS": str(tmp_path / "records.jsonl")}
    with _listening() as busy:
        port = busy.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "locust", "-f", str(HELPERS / "locust_records.py"), "--headless",
                            "-u", "1", "-t", "5s", "--host", "http://127.0.0.1:9", "--prometheus-port", str(port)],
                           capture_output=True, text=True, timeout=60, cwd=REPO, env=env)  # fmt: skip
    one_line_exit_2(p, f"--prometheus-port {port}: cannot serve /metrics there")
    assert not (tmp_path / "records.jsonl").read_bytes()  # no request was sent


CUT_SUMMARY = '{"run_id": "r1", "total": {"requests": 12, "qps": 3.'  # a write cut short


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("summary.json", CUT_SUMMARY, "summary.json is not a readable summary"),
        ("summary.json", "[1, 2]", "summary.json is not a readable summary (a JSON list, not an object)"),
        ("requests.parquet", "PAR1 cut", "requests.parquet cannot be read as request records"),
    ],
    ids=["cut summary", "summary not an object", "cut parquet"],
)
@pytest.mark.parametrize("command", ["report", "compare"])
@IN_PROCESS
def test_report_and_compare_on_a_damaged_run(tmp_path, command, name, content, words):
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text(content)
    dirs = [str(run)] if command == "report" else [str(run), str(run)]
    p = run_cli(command, *dirs)
    one_line_exit_2(p, words)


@IN_PROCESS
def test_compare_on_a_cut_repeat_json(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "repeat.json").write_text('{"stages": [')
    p = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    one_line_exit_2(p, "repeat.json is not a readable repeat.json")


@IN_PROCESS
@pytest.mark.parametrize("where", ["a directory", "no folder"])
def test_compare_refuses_an_html_path_it_cannot_write_before_any_work(tmp_path, where):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"run_id": "r1", "total": {"requests": 0}}')
    html = tmp_path if where == "a directory" else tmp_path / "nope" / "x.html"
    p = run_cli("compare", str(run), str(run), "--html", str(html))
    one_line_exit_2(p, f"--html {html} is")
    assert not p.stdout  # refused before the table


@IN_PROCESS
def test_report_refuses_an_empty_slo(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"run_id": "r1", "total": {"requests": 0}}')
    p = run_cli("report", str(run), "--slo=")
    one_line_exit_2(p, "empty --slo")
    assert not (run / "report.html").exists()
