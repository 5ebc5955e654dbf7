"""`swarm twin` against the calibrated simulator at seed 000's round-1 flags (issue 28's first "Done
when"): a twin fitted from one short sweep (the fit sees only the run's /metrics scrapes and request
records) predicts the answer at --max-num-seqs 64 and 256 within 10% of the simulator's own.

The simulator's answers come from its engine on the virtual clock (sim/calibrate.py, the same search,
the calibrated profile at those flags: what a search over HTTP measures, without minutes of load);
the QPS at a fixed concurrency beyond each cap (96 users at 64, 192 at 256) is checked against the
engine's the same way, and over HTTP at 64 on the fitted sweep's own 96-user stage, within 15%: the HTTP
path (client, streaming, the next request's send) costs the real-time simulator about 5% of the QPS its
engine alone reaches, which the twin (an engine) does not add. Not over HTTP at 256: 192 users on one
worker of a busy 2-core machine are client-bound (53 QPS measured where the engine makes 61).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from swarm.load.workloads import workload_draw
from swarm.sim.calibrate import closed_loop
from swarm.sim.profile import load_profile
from swarm.tune.twin.predict import (
    WARMUP_S,
    WINDOW_S,
    configure_profile,
    level_result,
    search_users,
)
from swarm.tune.twin.profile import read_twin
from tests.helpers.support import swarm_cmd

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

ROUND_1 = [
    "--sim-arg=--max-num-seqs=64",
    "--sim-arg=--max-model-len=65536",
    "--sim-arg=--gpu-memory-utilization=0.90",
]
LOAD = ["--workload", "short_qa", "--workers", "1"]
SLO_S = 0.8


def swarm(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    p = subprocess.run(swarm_cmd(*args), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def qps(run_dir, stage: int) -> float:
    summary = json.loads((run_dir / "summary.json").read_text())
    return next(s for s in summary["stages"] if s["stage"] == stage)["total"]["qps"]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("twin")
    run = d / "round1"
    swarm(
        "run",
        *ROUND_1,
        "--sweep",
        "8,24,48,96",
        "--stage-time",
        "7s",
        "--warmup",
        "2s",
        "--out",
        str(run),
        *LOAD,
    )
    fit = swarm("twin", "fit", str(run), "-o", str(d / "twin.toml"))
    return d, run, fit.stdout


def truth_answer(max_num_seqs: int) -> int:
    draw = workload_draw("short_qa")
    p = load_profile("rtx5090x4-qwen3.6-27b").with_overrides(
        kv_cache_tokens=66079, max_model_len=65536, max_num_seqs=max_num_seqs
    )
    answer, _, _ = search_users(
        lambda u: closed_loop(p, (), 0, u, WARMUP_S, WINDOW_S, seed=u, ttft_limit_s=SLO_S, draw=draw), SLO_S
    )
    assert answer is not None
    return answer


def test_the_twin_predicts_64_and_256_within_ten_percent(fitted):
    d, _run, fit_out = fitted
    assert "engine.max_num_seqs = 64 [fitted]" in fit_out, fit_out
    twin = read_twin(d / "twin.toml")
    # the step cost the fit recovered, against the profile's own (the fit never saw it)
    true_step = load_profile("rtx5090x4-qwen3.6-27b").step
    assert twin.profile.step.base_s == pytest.approx(true_step.base_s, rel=0.1)
    assert twin.profile.step.decode_token_s == pytest.approx(true_step.decode_token_s, rel=0.1)
    p = swarm(
        "twin",
        "predict",
        str(d / "twin.toml"),
        "--grid",
        "max-num-seqs=64,256",
        "--search",
        "concurrency",
        "--slo",
        "ttft_p99<=800ms",
        "--workload",
        "short_qa",
        "--out",
        str(d / "pred"),
    )
    result = json.loads((d / "pred" / "tune.json").read_text())
    answers = {c["name"]: c["answer"] for c in result["configs"]}
    for n in (64, 256):
        assert answers[f"max-num-seqs={n}"] == pytest.approx(truth_answer(n), rel=0.1), (n, p.stdout)
    assert result["best"] == "max-num-seqs=256"
    assert {c["name"]: c["bottleneck"] for c in result["configs"]} == {
        "max-num-seqs=64": "max_num_seqs_cap",
        "max-num-seqs=256": "kv_bound",
    }
    assert "max-num-seqs=256: extrapolated: up to" in p.stdout  # beyond the 64 the run reached
    assert "max-num-seqs=64: extrapolated" not in p.stdout
    assert (d / "pred" / "tune.html").exists() and (d / "pred" / "pareto.png").exists()


def test_the_twin_qps_matches_the_simulator_measured_over_http_and_its_engine(fitted):
    d, run, _ = fitted
    twin = read_twin(d / "twin.toml")
    draw = workload_draw("short_qa")
    truth = load_profile("rtx5090x4-qwen3.6-27b").with_overrides(kv_cache_tokens=66079, max_model_len=65536)
    for n, users in ((64, 96), (256, 192)):
        profile = configure_profile(twin, {"--max-num-seqs": str(n)}, [])
        predicted = level_result(twin, profile, users, draw).qps
        engine = closed_loop(
            truth.with_overrides(max_num_seqs=n), (), 0, users, WARMUP_S, WINDOW_S, draw=draw
        ).qps
        assert predicted == pytest.approx(engine, rel=0.1), (n, predicted, engine)
    # over HTTP: the fitted sweep's own 96-user stage at 64
    profile = configure_profile(twin, {"--max-num-seqs": "64"}, [])
    predicted = level_result(twin, profile, 96, draw).qps
    assert predicted == pytest.approx(qps(run, 3), rel=0.15), (predicted, qps(run, 3))
