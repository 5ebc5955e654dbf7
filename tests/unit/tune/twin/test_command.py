"""`swarm twin` (swarm/tune/twin/command.py): its bad input is one line and exit 2; predict prints swarm
tune's table with the prediction's notes and writes tune.json and tune.html."""

from __future__ import annotations

import io
import json

import pytest

from swarm.cli import main
from swarm.tune.twin.command import with_progress
from tests.helpers.support import DATA
from tests.unit.tune.twin.helpers import write_known

PREDICT = ["--search", "concurrency", "--slo", "ttft_p99<=500ms", "--workload", "short_qa"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["twin"], "give fit RUN_DIR or predict PROFILE"),
        (["twin", "fit", "no/such/dir"], "not a directory"),
        (
            ["twin", "predict", "{twin}", "--slo", "ttft_p99<=1s", "--workload", "short_qa"],
            "--search concurrency is required",
        ),
        (
            ["twin", "predict", "{twin}", "--search", "concurrency", "--workload", "short_qa"],
            "--slo is required",
        ),
        (
            [
                "twin",
                "predict",
                "{twin}",
                "--search",
                "concurrency",
                "--slo",
                "e2e_p99<=1s",
                "--workload",
                "short_qa",
            ],
            "ttft_p99<=LIMIT only",
        ),
        (
            ["twin", "predict", "{twin}", "--search", "concurrency", "--slo", "ttft_p99<=1s"],
            "--workload is required",
        ),
        (["twin", "predict", "{twin}", *PREDICT, "--assume", "speed*2"], "bad --assume"),
        (
            ["twin", "predict", "{twin}", *PREDICT, "--grid", "gpu-memory-utilization=0.9"],
            "maps no such flag",
        ),
        (["twin", "predict", "{twin}", *PREDICT, "--assume", "max_num_seqs=2.5"], "a whole number >= 1"),
        (["twin", "predict", "{twin}", *PREDICT, "--assume", "max_num_seqs=0"], "a whole number >= 1"),
        (["twin", "predict", "{twin}", *PREDICT, "--assume", "max_num_seqs*0.01"], "becomes 0, below 1"),
        (["twin", "predict", "{twin}", *PREDICT, "--assume", "decode_cost*1e308"], "no request would finish"),
        (["twin", "predict", "{twin}", *PREDICT, "--grid", "max-num-seqs=0"], "must be >= 1"),
        (["twin", "predict", "{twin}", *PREDICT, "--grid", "max-num-seqs=4,4"], "4 is given twice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, said):
    twin = str(write_known(tmp_path / "twin.toml"))
    assert main([a.replace("{twin}", twin) for a in argv]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


def test_predict_prints_the_table_with_its_notes_and_writes_the_tune_files(tmp_path, capsys):
    twin = str(write_known(tmp_path / "twin.toml"))
    out = tmp_path / "pred"
    argv = ["twin", "predict", twin, "--grid", "max-num-seqs=8,16", *PREDICT, "--assume", "decode_cost*0.8"]
    assert main([*argv, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "max-num-seqs=8 " in said and "max-num-seqs=16" in said and "* best for the SLO:" in said
    assert "swarm twin: max-num-seqs=16: assumes decode_cost*0.8; extrapolated: up to" in said
    assert "swarm twin: max-num-seqs=8: assumes decode_cost*0.8\n" in said
    result = json.loads((out / "tune.json").read_text())
    assert [c["name"] for c in result["configs"]] == ["max-num-seqs=8", "max-num-seqs=16"]
    assert (out / "tune.html").exists()


def test_a_prediction_the_twin_cannot_make_is_invalid_and_never_best(tmp_path, capsys):
    """Ten seconds a token: not one request finishes in the twin's window; the row says so."""
    twin = str(write_known(tmp_path / "twin.toml"))
    assert main(["twin", "predict", twin, *PREDICT, "--assume", "decode_cost*1e4"]) == 1
    said = capsys.readouterr().out
    assert "invalid" in said and "no request finished within the twin's 60 s window at 1 user" in said
    assert "best" not in said and " *" not in said


def test_a_long_grid_says_how_far_it_is_on_stderr():
    ticks = iter(range(0, 100, 2))  # each prediction takes 2 s
    out = io.StringIO()
    done = with_progress(list(range(8)), lambda i: i * i, every_s=5.0, clock=lambda: next(ticks), out=out)
    assert done == [i * i for i in range(8)]
    assert out.getvalue().splitlines() == [
        "swarm twin: 3 of 8 configurations predicted in 6 s; about 10 s left",
        "swarm twin: 6 of 8 configurations predicted in 12 s; about 4 s left",
    ]


def test_fit_writes_a_profile_that_predict_reads(tmp_path, capsys):
    """On the recorded simulator sweep (tests/helpers/data/sim_sweep_run, --max-num-seqs 6)."""

    from swarm.tune.twin.profile import read_twin

    data = DATA / "sim_sweep_run"
    assert main(["twin", "fit", str(data), "-o", str(tmp_path / "t.toml")]) == 0
    said = capsys.readouterr().out
    assert "swarm twin: engine.max_num_seqs = 6 [fitted] running pinned at 6" in said
    assert f"swarm twin: profile in {tmp_path / 't.toml'}" in said
    twin = read_twin(tmp_path / "t.toml")
    assert twin.profile.max_num_seqs == 6 and twin.running_reached == pytest.approx(6.0, rel=0.05)
    assert twin.profile.step.decode_token_s > 0
