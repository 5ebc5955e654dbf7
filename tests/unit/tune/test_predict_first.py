"""swarm/tune/predict_first.py: `swarm tune --predict-first K` on the recorded simulator sweep
(tests/helpers/data/sim_sweep_run, --max-num-seqs 6): the base measured, a twin fitted to its run,
the grid predicted and ranked, only the K best measured (here faked: the real measurement is
tests/integration/test_tune.py's machinery), each with its predicted answer and the error."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from swarm.cli import main
from swarm.core.errors import UsageError
from swarm.tune.plan import config_name
from swarm.tune.predict_first import PredictFirst, check_predict_first, predict_first
from swarm.tune.results import ConfigResult, TuneResult

DATA = Path(__file__).resolve().parents[2] / "helpers" / "data" / "sim_sweep_run"
SLO = "ttft_p99<=800ms"


def run_args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**({"search": "concurrency", "workload": "short_qa", "slo": SLO} | kw))


def test_what_predict_first_needs_is_checked_up_front():
    check_predict_first(2, run_args(), guided=False)
    for k, args, guided, said in [
        (0, run_args(), False, "K must be >= 1"),
        (1, run_args(), True, "--guided both"),
        (1, run_args(search=None), False, "needs --search concurrency"),
        (1, run_args(workload=None), False, "needs --workload"),
        (1, run_args(slo="e2e_p99<=2s"), False, "ttft_p99<=LIMIT only"),
    ]:
        with pytest.raises(UsageError, match=said):
            check_predict_first(k, args, guided)


def test_tune_refuses_predict_first_without_a_search_in_one_line(capsys, tmp_path):
    argv = [
        "tune",
        "--serve-cmd",
        "python -m swarm sim",
        "--grid",
        "max-num-seqs=4,8",
        "--out",
        str(tmp_path / "t"),
    ]
    assert main([*argv, "--predict-first", "1", "--sweep", "4", "--slo", SLO]) == 2
    assert "--predict-first needs --search concurrency" in capsys.readouterr().err


def test_the_grid_is_predicted_and_only_the_best_k_measured(tmp_path, capsys):
    run = tmp_path / "base-run"
    shutil.copytree(DATA, run)
    measured: list[str] = []

    def measure(flags):
        name = config_name(flags)
        measured.append(name)
        answer = {"base": 9.0}.get(name, 20.0)
        return ConfigResult(name, dict(flags), ["sim"], "ok", run_dir=str(run), answer=answer)

    grid = [
        {"--max-num-seqs": "4"},
        {"--max-num-seqs": "16"},
        {"--max-num-seqs": "8"},
        {"--gpu-memory-utilization": "0.9"},
    ]
    result = TuneResult(["sim"], "concurrency", SLO, 1, None, [])
    predict_first(PredictFirst(tmp_path, ["sim"], grid, 1, SLO, "short_qa", measure), result)
    assert measured == ["base", "max-num-seqs=16"]  # the twin ranks 16 above 8 above 4
    assert (tmp_path / "twin.toml").exists()
    [p] = result.predictions
    assert p.config == "max-num-seqs=16" and p.measured == 20.0
    assert p.error == pytest.approx((p.predicted - 20.0) / 20.0)
    assert any(n.startswith("extrapolated: up to") for n in p.notes)  # beyond the 6 the run reached
    said = capsys.readouterr().out
    assert (
        "gpu-memory-utilization=0.9: not predicted (--gpu-memory-utilization: the twin maps no such flag"
        in said
    )
    assert f"max-num-seqs=16: predicted {p.predicted:g}, measured 20 (error {100 * p.error:+.1f}%)" in said
    order = [said.index(f"predicted max-num-seqs={n}: answer") for n in (16, 8, 4)]
    assert order == sorted(order)
