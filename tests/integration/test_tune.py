"""`swarm tune` end to end against the simulator (issue 27): each configuration started, measured by
a swarm run and stopped; a server that does not start is a recorded failure, not a crash; bad input
is one line before any server starts; Ctrl-C writes what is done; no server outlives the command."""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers.support import start, swarm_cmd, wait_for

pytestmark = pytest.mark.integration

SIM = f"{sys.executable} -m swarm sim --profile instant"
FAST = [
    "--sweep",
    "4",
    "--stage-time",
    "5s",
    "--workload",
    "short_qa",
    "--max-tokens",
    "16",
    "--workers",
    "1",
]


def tune(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(swarm_cmd("tune", *args), capture_output=True, text=True, timeout=timeout)


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def servers_gone(configs: list[dict]) -> None:
    """No configuration's server still listens on its port."""
    for c in configs:
        port = int(c["command"][c["command"].index("--port") + 1])
        assert not listening(port), f"{c['name']}'s server still listens on {port}"


def test_a_grid_of_two_configurations(tmp_path):
    out = tmp_path / "tune"
    p = tune("--serve-cmd", SIM, "--grid", "max-num-seqs=2,8", "--out", str(out), *FAST)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = json.loads((out / "tune.json").read_text())
    configs = result["configs"]
    assert [c["name"] for c in configs] == ["max-num-seqs=2", "max-num-seqs=8"]
    assert [c["status"] for c in configs] == ["ok", "ok"], configs
    assert all(c["qps"] and c["output_tok_s"] for c in configs), configs
    assert configs[1]["command"][configs[1]["command"].index("--max-num-seqs") + 1] == "8"
    for c in configs:  # each run's provenance holds its configuration's exact command
        run = json.loads((out / "configs" / c["name"] / "summary.json").read_text())
        assert run["provenance"]["target_command"] == shlex.join(c["command"])
        assert next(iter(run["provenance"]["targets"].values()))["family"] == "vllm"
    assert "max-num-seqs=2" in p.stdout and "max-num-seqs=8" in p.stdout  # the table
    assert (out / "tune.html").exists()
    assert "it starts with:" in p.stdout and result["best"] in {"max-num-seqs=2", "max-num-seqs=8"}
    servers_gone(configs)
    again = tune("--serve-cmd", SIM, "--grid", "max-num-seqs=2,8", "--resume", str(out), *FAST, timeout=60)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("measured already (--resume), skipped") == 2, again.stdout
    assert json.loads((out / "tune.json").read_text())["configs"] == configs


def test_a_server_that_does_not_start_is_a_recorded_failure(tmp_path):
    out = tmp_path / "tune"
    configs_file = tmp_path / "serve.json"
    configs_file.write_text(json.dumps([{"no-such-flag": 1}, {"max-num-seqs": 4}]))
    p = tune("--serve-cmd", SIM, "--configs", str(configs_file), "--out", str(out), *FAST)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    bad, good = json.loads((out / "tune.json").read_text())["configs"]
    assert bad["status"] == "failed" and "exited with code 2" in bad["reason"], bad
    assert "unrecognized arguments: --no-such-flag" in bad["log_tail"], bad
    assert good["status"] == "ok" and good["qps"], good
    servers_gone([bad, good])


@pytest.mark.parametrize(
    "args, words",
    [
        (["--grid", "max-num-seqs=2,8"], "--serve-cmd is required"),
        (["--serve-cmd", SIM, "--grid", "max-num-seqs"], "bad --grid"),
        (["--serve-cmd", SIM, "--endpoint", "nope"], "invalid choice"),
        (["--serve-cmd", SIM, "--sweep", "a,b"], "bad --sweep"),
        (["--serve-cmd", SIM, "--search", "concurrency"], "needs a criterion"),
        (["--serve-cmd", "vllm serve m", "--virtual", "--sweep", "2"], "must run `swarm sim`"),
        (["--serve-cmd", SIM, "--virtual", "--rate", "2"], "give --sweep, not --search or --rate"),
        (["--serve-cmd", SIM, "--virtual", "--sweep", "2", "--workload", "synthetic"], "tokenizer"),
    ],
)
def test_bad_input_is_one_line_before_any_server_starts(tmp_path, args, words):
    out = tmp_path / "tune"
    p = tune(*args, "--out", str(out), timeout=60)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr and words in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not out.exists()  # nothing started, nothing written


def test_ctrl_c_stops_the_server_and_writes_what_is_done(tmp_path):
    out = tmp_path / "tune"
    args = ["--serve-cmd", SIM, "--grid", "max-num-seqs=2,8", "--out", str(out), *FAST[:2], "-t", "60s"]
    args += ["--stage-time", "60s", "--workers", "1"]
    with start(swarm_cmd("tune", *args), tmp_path / "tune.log") as proc:
        wait_for(lambda: "[4 users]" in proc.output(), 60, "the first configuration's run")
        time.sleep(1)
        proc.signal(signal.SIGINT)  # the terminal's Ctrl-C: the tune's whole process group
        assert proc.wait(timeout=90) == 130, proc.output()[-3000:]
    result = json.loads((out / "tune.json").read_text())
    assert [c["status"] for c in result["configs"]] == ["interrupted"], result
    servers_gone(result["configs"])


def test_a_failed_servers_log_is_bounded_and_shown_escaped(tmp_path):
    """A server dying with a 20 MB line holding terminal controls: its tail in the console, tune.json
    and tune.html is bounded per line and in all, and the console shows its controls written out."""
    out = tmp_path / "tune"
    noisy = "import sys; print('\\x1b[2J' + 'x' * 20_000_000); print('Error: boom'); sys.exit(3)"
    p = tune("--serve-cmd", f"{sys.executable} -c {shlex.quote(noisy)}", "--out", str(out), "-u", "1")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Error: boom" in p.stdout and "\x1b" not in p.stdout and "\\x1b" in p.stdout, p.stdout[-3000:]
    assert "more characters cut]" in p.stdout and len(p.stdout) < 20_000, len(p.stdout)
    (config,) = json.loads((out / "tune.json").read_text())["configs"]
    assert config["status"] == "failed" and len(config["log_tail"]) < 20_000, len(config["log_tail"])
    assert (out / "tune.html").stat().st_size < 200_000
