"""swarm/tune/twin/calibrate.py: a fitted twin run at its own run's highest load; outside the
measured QPS's interval its fixed step cost is scaled until it answers as measured, inside it is
kept, and either way the evidence says so."""

from __future__ import annotations

import dataclasses

import pytest

from swarm.load.workloads import workload_draw
from swarm.tune.twin.calibrate import fit_and_write
from swarm.tune.twin.fit import RunEvidence, StageEvidence
from swarm.tune.twin.predict import configure_profile, level_result
from swarm.tune.twin.profile import read_twin
from tests.unit.tune.twin.helpers import known_fit

USERS = 16


def evidence(qps: float, ci: tuple[float, float] | None = None, completed: int = 400) -> RunEvidence:
    top = StageEvidence(
        stage=0, users=USERS, running_mean=8.0, running_max=8.0, running_pinned=1.0, waiting_mean=8.0,
        kv_mean=None, itl_mean_s=0.02, prefill_tok_s=None, kv_tokens_mean=None, prefix_hit_rate=None,
        qps=qps, qps_ci=ci, completed=completed,
    )  # fmt: skip
    return RunEvidence((top,), (), (20,), 1.0, 200, 16, "vllm", workloads=("short_qa",))


def twin_qps(path) -> float:
    twin = read_twin(path)
    return level_result(twin, configure_profile(twin, {}, []), USERS, workload_draw("short_qa")).qps


@pytest.fixture
def fit():
    return dataclasses.replace(known_fit(), workloads=("short_qa",))


def test_a_twin_slower_than_its_run_is_calibrated_to_it(tmp_path, fit):
    path = tmp_path / "twin.toml"
    fit_and_write(evidence(1.0), fit, path, "run")  # written once as fitted, to read its own answer
    uncalibrated = twin_qps(path)
    measured = 0.7 * uncalibrated
    got = fit_and_write(evidence(measured), fit, path, "run")
    decode = got.params["step.base_s"]
    assert (
        decode.value > 0.01
        and "calibrated x" in decode.evidence
        and "the run's highest load" in decode.quality
    )
    assert twin_qps(path) == pytest.approx(measured, rel=0.03)  # the file written is the calibrated one


def test_a_twin_inside_the_runs_interval_is_kept(tmp_path, fit):
    path = tmp_path / "twin.toml"
    fit_and_write(evidence(1.0), fit, path, "run")
    answer = twin_qps(path)
    got = fit_and_write(evidence(answer * 1.05, ci=(answer * 0.9, answer * 1.2)), fit, path, "run")
    decode = got.params["step.base_s"]
    assert decode.value == 0.01 and "checked: the twin answers the run's own 16 users" in decode.evidence
    assert "the run's 95% interval" in decode.evidence
    # without the run's interval, a count's: 400 completions give +/- 9.8% (the normal's 1.96 / 20)
    kept = fit_and_write(evidence(answer * 1.08), fit, path, "run").params["step.base_s"]
    assert kept.value == 0.01 and "+/- 1.96/sqrt(400 completions)" in kept.evidence


def test_a_workload_the_twin_cannot_draw_is_not_checked(tmp_path, fit):
    got = fit_and_write(evidence(1.0), dataclasses.replace(fit, workloads=()), tmp_path / "t.toml", "run")
    assert "not checked against the run's own load" in got.params["step.base_s"].evidence
