"""One configuration's record (swarm/tune/run.py): swarm run's exit code decides it (0
and 1 measured, 2 ends the tune, 130 an interrupt, others a failure with the reason)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.core.errors import UsageError
from swarm.tune import run as tune_run
from swarm.tune.results import ConfigResult
from swarm.tune.server import Server


def ctx(tmp_path: Path) -> tune_run.TuneContext:
    return tune_run.TuneContext(["srv"], ["--sweep", "4"], tmp_path, 10.0, 4, 2.5)


def server(tmp_path: Path) -> Server:
    """A server that has exited, with its log."""
    log = tmp_path / "s.log"
    log.write_text("line 1\nKilled: out of memory\n")
    popen = subprocess.Popen([sys.executable, "-c", "pass"])
    popen.wait()
    return Server(popen, "http://127.0.0.1:1", log)


def record(tmp_path: Path) -> ConfigResult:
    return ConfigResult("np=4", {"-np": "4"}, ["srv", "-np", "4"], "failed", run_dir=str(tmp_path / "run"))


def test_run_command(tmp_path):
    c = ctx(tmp_path)
    cmd = tune_run.run_command(c, "http://127.0.0.1:9", tmp_path / "nope")
    assert cmd[1:] == ["-m", "swarm", "run", "--host", "http://127.0.0.1:9", "--out", str(tmp_path / "nope"),
                       "--sweep", "4"]  # fmt: skip
    assert "--overwrite" in tune_run.run_command(c, "http://127.0.0.1:9", tmp_path)  # an earlier try's


def test_run_command_hands_the_servers_command_to_the_provenance_with_its_secrets_masked(tmp_path):
    serve = ["vllm", "serve", "m", "--max-num-seqs", "8", "--api-key", "sk-server-secret-123"]
    cmd = tune_run.run_command(ctx(tmp_path), "http://127.0.0.1:9", tmp_path / "x", serve)
    given = cmd[cmd.index("--target-command") + 1]
    assert given == "vllm serve m --max-num-seqs 8 --api-key ***"
    assert not any("sk-server-secret" in arg for arg in cmd)


def test_exit_2_ends_the_tune_with_swarm_runs_line(tmp_path):
    with pytest.raises(UsageError, match="swarm run refused: bad --slo"):
        tune_run._recorded(ctx(tmp_path), record(tmp_path), 2, "bad --slo", False, server(tmp_path))


def test_exit_130_is_an_interrupt(tmp_path):
    with pytest.raises(tune_run.Interrupted) as e:
        tune_run._recorded(ctx(tmp_path), record(tmp_path), 130, "", False, server(tmp_path))
    assert e.value.result.status == "interrupted"


def test_another_exit_code_is_a_failure_with_the_servers_tail_when_it_died(tmp_path):
    got = tune_run._recorded(ctx(tmp_path), record(tmp_path), 3, "aborted", True, server(tmp_path))
    assert got.status == "failed" and got.reason == "swarm run exit 3: aborted"
    assert "out of memory" in (got.log_tail or "")


def test_a_run_without_a_summary_is_a_failure(tmp_path):
    got = tune_run._recorded(ctx(tmp_path), record(tmp_path), 0, "", False, server(tmp_path))
    assert got.status == "failed" and "run directory could not be read" in (got.reason or "")


def test_exit_1_is_a_measured_configuration(tmp_path, monkeypatch):
    seen = {}

    def fake(name, flags, command, run_dir, *, gpus, gpu_hourly_cost):
        seen.update(name=name, gpus=gpus, cost=gpu_hourly_cost, run_dir=run_dir)
        return ConfigResult(name, flags, command, "ok", answer=12.0)

    monkeypatch.setattr(tune_run, "config_from_run", fake)
    got = tune_run._recorded(ctx(tmp_path), record(tmp_path), 1, "", False, server(tmp_path))
    assert got.status == "ok" and got.answer == 12.0
    assert seen == {"name": "np=4", "gpus": 4, "cost": 2.5, "run_dir": tmp_path / "run"}
    assert json.dumps(got.flags) == '{"-np": "4"}'


def test_the_key_goes_to_each_run_by_the_environment_not_the_command_line(tmp_path, monkeypatch):
    """`swarm tune --api-key K`: each configuration's swarm run gets K as $OPENAI_API_KEY (its argv
    is any local user's to read) and the origin options as given; swarm run applies the key's rule."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    c = tune_run.TuneContext(
        ["srv"], ["--api-key", "sk-1", "--api-key-origin", "http://a:1"], tmp_path, 1, 1, None
    )
    cmd = tune_run.run_command(c, "http://127.0.0.1:9", tmp_path / "run")
    assert "sk-1" not in cmd and cmd[-2:] == ["--api-key-origin", "http://a:1"]
    assert tune_run.run_env(c)["OPENAI_API_KEY"] == "sk-1"
    assert "OPENAI_API_KEY" not in tune_run.run_env(ctx(tmp_path))
