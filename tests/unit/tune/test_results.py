"""swarm/tune/results.py: one configuration's run directory read, cost, the Pareto front, the
best configuration, the console table and tune.json kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from swarm.core.runfiles import TUNE_JSON
from swarm.tune import results as tr
from swarm.tune.results import ConfigResult, GuidedStep, ProbePoint, TuneResult

DATA = Path(__file__).resolve().parents[2] / "helpers" / "data"


def block(qps, tok_s, ttft_p99, tpot_mean=0.02, tpot_p99=0.03):
    return {
        "requests": int(qps * 10),
        "qps": qps,
        "output_tok_s": tok_s,
        "failures": {},
        "cancelled": 0,
        "ttft_s": {"p50": None if ttft_p99 is None else ttft_p99 / 2, "p99": ttft_p99},
        "tpot_s": {"mean": tpot_mean, "p99": tpot_p99},
    }


def stage(i, users, qps, tok_s, ttft_p99, **kw):
    return {
        "stage": i,
        "name": f"stage {i + 1}",
        "duration_s": 10.0,
        "users": users,
        "total": block(qps, tok_s, ttft_p99, **kw),
    }


def write_run(directory: Path, summary: dict, diagnosis: list | None = None) -> Path:
    directory.mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps(summary))
    if diagnosis is not None:
        (directory / "diagnosis.json").write_text(json.dumps(diagnosis))
    return directory


def search_summary():
    stages = [
        stage(0, 16, 20.0, 600.0, 0.05),
        stage(1, 64, 60.0, 1800.0, 0.4),
        stage(2, 128, 64.0, 1900.0, 1.5),
        stage(3, 96, 63.0, 1850.0, 0.7),
        stage(4, 100, 63.5, 1860.0, None),  # after the search's end: no probe
    ]
    probes = [
        {"stage": 0, "load": 16, "ok": True},
        {"stage": 1, "load": 64, "ok": True, "qps": 61.0, "ttft_p99": 0.3},  # its settled window
        {"stage": 2, "load": 128, "ok": False},
        {"stage": 3, "load": 96, "ok": True},
    ]
    search = {
        "mode": "concurrency",
        "answer": 96.0,
        "bracket": [96.0, 128.0],
        "answer_stage": 3,
        "qps": 62.0,  # judged on the verdict's window
        "ttft_p99_s": 0.69,
        "probes": probes,
        "why_kind": "kv_bound",
        "why": "At 128 users KV-cache usage was 96%.",
    }
    return {"stages": stages, "search": search}


def test_config_from_a_search_run(tmp_path):
    run = write_run(tmp_path / "run", search_summary())
    c = tr.config_from_run(
        "max-num-seqs=256",
        {"--max-num-seqs": "256"},
        ["vllm", "serve", "M"],
        run,
        gpus=4,
        gpu_hourly_cost=2.5,
    )
    assert (c.status, c.answer, c.bracket) == ("ok", 96.0, (96.0, 128.0))
    assert (c.qps, c.ttft_p99_s) == (62.0, 0.69)  # the search's own figures at its answer
    assert (c.output_tok_s, c.tpot_p99_s) == (1850.0, 0.03)  # the rest from the answer's stage
    assert (c.bottleneck, c.why) == ("kv_bound", "At 128 users KV-cache usage was 96%.")
    assert [p.users for p in c.points] == [16, 64, 128, 96]  # the stage after the search is none
    assert [p.met_slo for p in c.points] == [True, True, False, True]
    # a probe's point shows the figures its verdict was judged on, else its stage's block
    assert [(p.qps, p.ttft_p99_s) for p in c.points[:3]] == [(20.0, 0.05), (61.0, 0.3), (64.0, 1.5)]
    assert c.points[0].output_tok_s_per_user == pytest.approx(50.0)  # 1 / 20 ms
    assert c.cost_per_m_output_tokens == pytest.approx(4 * 2.5 / (1850.0 * 3600) * 1e6)
    assert c.cost_per_k_requests == pytest.approx(4 * 2.5 / (62.0 * 3600) * 1000)
    assert c.run_dir == str(run) and c.command == ["vllm", "serve", "M"]


def test_config_from_a_sweep_with_an_slo_takes_the_highest_load_meeting_it(tmp_path):
    summary = {
        "stages": [
            stage(0, 10, 13.4, 400.0, 0.17),
            stage(1, 64, 45.2, 1300.0, 0.29),
            stage(2, 128, 60.2, 1700.0, 0.9),
        ],
        "slo": [{"objective": "ttft_p99<=500ms", "ok": False}],
    }
    diagnosis = [
        {"kind": "saturation", "stage": 2, "text": "ceiling"},
        {"kind": "compute_bound", "stage": 2, "text": "busy"},
        {"kind": "max_num_seqs_cap", "stage": 1, "text": "capped at 64"},
    ]
    c = tr.config_from_run("base", {}, ["swarm", "sim"], write_run(tmp_path / "r", summary, diagnosis))
    assert (c.answer, c.bracket, c.qps) == (64.0, (64.0, 128.0), 45.2)
    assert [p.met_slo for p in c.points] == [True, True, False]
    assert (c.bottleneck, c.why) == ("max_num_seqs_cap", "capped at 64")  # the one at the answer's stage
    assert c.cost_per_m_output_tokens is None  # no cost given


def test_config_from_a_sweep_without_an_slo_takes_the_best_stage(tmp_path):
    summary = {
        "stages": [
            stage(0, 10, 13.4, 400.0, 0.17),
            stage(1, 64, 45.2, 1300.0, 0.29),
            stage(2, 128, 44.0, 1250.0, 0.9),
        ]
    }
    c = tr.config_from_run("base", {}, [], write_run(tmp_path / "r", summary, []))
    assert (c.answer, c.bracket, c.qps, c.output_tok_s) == (None, None, 45.2, 1300.0)
    assert all(p.met_slo is None for p in c.points)
    assert (c.bottleneck, c.why) == (None, None)


def test_config_from_the_recorded_sim_sweep_runs_the_diagnosis(tmp_path):
    """tests/helpers/data/sim_sweep_run: no diagnosis.json, no users in its summary."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "sim_sweep_run", run)
    c = tr.config_from_run("max-num-seqs=6", {"--max-num-seqs": "6"}, [], run)
    assert len(c.points) == 5 and c.answer is None
    assert c.qps == max(p.qps for p in c.points)
    assert c.bottleneck in tr.BOTTLENECK_KINDS


def test_per_user_speed_falls_back_to_tokens_over_users():
    assert tr.per_user_tok_s({"tpot_s": {"mean": 0.025}}, 8) == pytest.approx(40.0)
    assert tr.per_user_tok_s({"tpot_s": {"mean": None}, "output_tok_s": 80.0}, 8) == 10.0
    assert tr.per_user_tok_s({"output_tok_s": 80.0}, None) == 0.0


def test_pick_bottleneck_prefers_the_answers_stage_then_the_diagnosis_order():
    found = [("compute_bound", 3, "c"), ("kv_bound", 2, "k"), ("saturation", 3, "s")]
    assert tr.pick_bottleneck(found, 3) == ("compute_bound", "c")
    assert tr.pick_bottleneck(found, None) == ("kv_bound", "k")
    assert tr.pick_bottleneck([("saturation", 1, "s")], 1) == (None, None)


def test_cost():
    # 4 GPUs at $2.5/h, 1000 tok/s: $10/h for 3.6 M tokens
    assert tr.cost_per_million_output_tokens(1000.0, 4, 2.5) == pytest.approx(10 / 3.6)
    assert tr.cost_per_thousand_requests(10.0, 4, 2.5) == pytest.approx(10 / 36)


def test_pareto_front():
    pts = [(10.0, 100.0), (20.0, 50.0), (5.0, 90.0), (20.0, 50.0), (30.0, 10.0), (15.0, 40.0)]
    assert tr.pareto_front(pts) == [0, 1, 3, 4]
    assert tr.pareto_front([]) == []


def ok(name, answer, tok_s, **kw):
    return ConfigResult(name, {}, [], "ok", answer=answer, output_tok_s=tok_s, **kw)


def test_best_config():
    a, b, c = ok("a", 64.0, 1000.0), ok("b", 128.0, 900.0), ok("c", 128.0, 950.0)
    failed = ConfigResult("f", {}, [], "failed", answer=512.0)
    assert tr.best_config([a, b, c, failed]) is c
    assert tr.best_config([ok("x", None, 5000.0), a]) is a  # an answer beats none
    assert tr.best_config([ok("x", None, 5000.0), ok("y", None, 4000.0)]).name == "x"
    assert tr.best_config([failed]) is None


def result():
    good = ok(
        "max-num-seqs=256",
        212.0,
        6100.0,
        bracket=(208.0, 216.0),
        qps=65.0,
        ttft_p99_s=0.78,
        tpot_p99_s=0.031,
        bottleneck="kv_bound",
        cost_per_m_output_tokens=0.455,
        points=[ProbePoint(64, None, 45.0, 1300.0, 35.0, 0.29, 0.03, True)],
    )
    failed = ConfigResult(
        "max-num-seqs=1024",
        {"--max-num-seqs": "1024"},
        ["vllm"],
        "failed",
        reason="exited with code 1 at start",
        log_tail="CUDA out of memory",
    )
    step = GuidedStep("max-num-seqs=256", "--max-num-seqs 64 -> 256", "capped", 48.0, 212.0)
    return TuneResult(
        ["vllm", "serve", "M"],
        "concurrency",
        "ttft_p99<=800ms",
        4,
        2.5,
        [good, failed],
        [step],
        best=good.name,
    )


def test_table_text():
    text = tr.table_text(result())
    lines = text.splitlines()
    assert (
        lines[0].split()[:2] == ["config", "status"] and "$/M tok" in lines[0] and "TTFT p99 (ms)" in lines[0]
    )
    assert "max-num-seqs=256 *" in lines[2] and "212 (208-216)" in lines[2] and "780" in lines[2]
    assert "kv_bound" in lines[2] and "0.46" in lines[2]
    assert "failed" in lines[3] and "exited with code 1 at start" in lines[3]
    assert lines[-1] == "* best for the SLO: max-num-seqs=256"
    r = result()
    r.gpu_hourly_cost = None
    assert "$/M tok" not in tr.table_text(r)


def test_tune_json_round_trip(tmp_path):
    path = tmp_path / "out" / TUNE_JSON
    tr.write_tune_json(path, result())
    assert tr.read_tune_json(path) == result()
    assert not list(path.parent.glob("*.tmp"))


def test_predicted_against_measured_in_the_table_and_tune_json(tmp_path):
    """--predict-first: each measured configuration's predicted answer and its error ride along."""
    assert tr.prediction_error(110.0, 100.0) == pytest.approx(0.1)
    assert tr.prediction_error(None, 100.0) is None and tr.prediction_error(90.0, None) is None
    ok = ConfigResult("max-num-seqs=256", {"--max-num-seqs": "256"}, ["x"], "ok", answer=200.0, qps=60.0)
    base = ConfigResult("base", {}, ["x"], "ok", answer=64.0, qps=44.0)
    result = TuneResult(["x"], "concurrency", "ttft_p99<=800ms", 1, None, [base, ok])
    result.predictions = [tr.PredictedMeasured("max-num-seqs=256", 197.0, 200.0, -0.015, ["extrapolated"])]
    lines = tr.table_text(result).splitlines()
    assert lines[0].rstrip().endswith("predicted (error)")
    assert lines[2].rstrip().endswith("-")  # base: not predicted
    assert lines[3].rstrip().endswith("197 (-1.5%)")
    tr.write_tune_json(tmp_path / "tune.json", result)
    assert tr.read_tune_json(tmp_path / "tune.json").predictions == result.predictions
