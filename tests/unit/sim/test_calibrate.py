"""swarm/sim/calibrate.py: the calibrated profile reproduces the seed's measurements on the virtual clock."""

from __future__ import annotations

import pytest

from swarm.sim.calibrate import CHAT_PROMPTS, SHORT_QA_PROMPTS, closed_loop, seed_script
from swarm.sim.profile import load_profile


def test_calibrated_profile_on_virtual_clock_matches_seed_000():
    """The fast check; tests/integration/test_sim_calibration.py does it over HTTP in real time."""
    p = load_profile("rtx5090x4-qwen3.6-27b")
    # the seed's own counting (30 s, each loop's last request included)
    for conc, qps in ((10, 13.4), (64, 45.2), (200, 64.9), (256, 64.7)):
        assert seed_script(p, SHORT_QA_PROMPTS, 50, conc) == pytest.approx(qps, rel=0.1), conc
    assert seed_script(p, CHAT_PROMPTS, 150, 200) == pytest.approx(32.2, rel=0.1)
    # steady state: the plateau, KV near full at the top, ~30-token answers
    r200 = closed_loop(p, SHORT_QA_PROMPTS, 50, 200, warmup_s=8, duration_s=20)
    r256 = closed_loop(p, SHORT_QA_PROMPTS, 50, 256, warmup_s=8, duration_s=20)
    assert abs(r256.qps / r200.qps - 1) < 0.03
    assert r256.max_kv >= 0.95 and r200.mean_kv >= 0.9
    assert 27 <= r200.mean_output_tokens <= 33


def test_a_drawn_workload_and_the_windows_token_rate_and_tpot():
    """`draw` replaces the prompt list (swarm twin predicts any built-in workload); on the instant
    profile's constant lengths the output rate is QPS x tokens and the TPOT is one step."""
    from swarm.sim.profile import LengthComponent, LengthDist, StepCost

    profile = load_profile("instant").with_overrides(
        step=StepCost(base_s=0.01), output_tokens=LengthDist((LengthComponent(value=11),))
    )
    drawn: list[int] = []

    def draw(rng):
        drawn.append(1)
        return ["<|im_start|>", "user", "hi"], 50

    r = closed_loop(profile, (), 0, 4, warmup_s=1.0, duration_s=5.0, draw=draw)
    assert drawn and r.mean_output_tokens == 11
    assert r.output_tok_s == pytest.approx(r.qps * 11)
    assert r.tpot_mean == pytest.approx(0.01)
