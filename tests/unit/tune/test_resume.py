"""`swarm tune --resume` (swarm/tune/resume.py): the earlier tune held against this one; a difference
is one line naming each (then -> now) and exit 2, unless --resume-anyway, which keeps both."""

from __future__ import annotations

import json
import sys

from swarm.tune.resume import option_changes
from tests.helpers.cli import run_cli

SIM = f"{sys.executable} -m swarm sim --profile instant"
RUN = ["--sweep", "2", "-t", "4s", "--stage-time", "2s", "--workload", "short_qa", "--max-tokens", "16"]


def test_run_options_are_compared_as_swarm_run_reads_them():
    assert option_changes(["-u", "4", "-t", "10s"], ["-t", "10s", "--users", "4"]) == []
    assert option_changes(["-u", "4", "--ignore-eos"], ["--users", "8"]) == [
        "--users 4 -> 8",
        "--ignore-eos (set) -> unset",
    ]
    assert option_changes([], ["--workload", "chat"]) == ["--workload unset -> chat"]


def tune(*args: str):
    return run_cli("tune", "--virtual", *args)


def test_a_resume_under_other_options_is_refused_and_anyway_keeps_both(tmp_path):
    out = str(tmp_path / "t")
    assert tune("--serve-cmd", SIM, "--grid", "max-num-seqs=2,4", "--out", out, *RUN).returncode == 0
    before = (tmp_path / "t" / "tune.json").read_text()
    other = ["--serve-cmd", f"{SIM} --max-model-len 4096", "--grid", "max-num-seqs=2,4,8", "--resume", out]
    moved = [*RUN[:3], "6s", *RUN[4:7], "chat", *RUN[8:]]  # -t 6s, --workload chat
    p = tune(*other, *moved)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    for said in (
        f"base command '{SIM}' -> '{SIM} --max-model-len 4096'",
        "--run-time 4s -> 6s",
        "--workload short_qa -> chat",
        "configurations 2 -> 3 (added max-num-seqs=8)",
        "--resume-anyway",
    ):
        assert said in p.stderr, p.stderr
    assert (tmp_path / "t" / "tune.json").read_text() == before  # nothing measured, nothing written

    p = tune(*other, *moved, "--resume-anyway")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stdout.count("measured already under the earlier setting (--resume-anyway), skipped") == 2
    result = json.loads((tmp_path / "t" / "tune.json").read_text())
    (then,) = result["earlier"]
    assert then["serve_cmd"] == SIM.split() and then["run_argv"] == RUN
    assert then["configs"] == ["max-num-seqs=2", "max-num-seqs=4"]
    assert result["serve_cmd"] == [*SIM.split(), "--max-model-len", "4096"] and result["run_argv"] == moved
    assert [c["name"] for c in result["configs"]] == ["max-num-seqs=2", "max-num-seqs=4", "max-num-seqs=8"]
