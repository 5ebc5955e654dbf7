"""swarm/tune/twin/fit.py: synthetic evidence made from known engine parameters; the fit recovers
them, refuses what the evidence cannot give by name, and marks what it only extrapolates."""

from __future__ import annotations

import dataclasses
import random

import pytest

from swarm.tune.twin.fit import (
    EXTRAPOLATED,
    FITTED,
    REFUSED,
    RunEvidence,
    StageEvidence,
    fit_line,
    fit_twin,
    length_components,
)

BASE, DECODE, PREFILL = 0.02, 0.00044, 0.00005
POOL, STATE, CAP = 66_000, 320, 64


def stage(users: int, tokens_per_seq: float, kv: bool = True, itl: bool = True, **kw) -> StageEvidence:
    running = min(users, CAP)
    waiting = users - running
    prefill_tok_s = 300.0
    step = (BASE + DECODE * running) / (1 - PREFILL * prefill_tok_s)  # ITL with the prefill its steps carry
    held = running * tokens_per_seq
    fields = dict(
        stage=users,
        users=users,
        running_mean=float(running),
        running_max=float(running),
        running_pinned=1.0,
        waiting_mean=float(waiting),
        kv_mean=(running * STATE + held) / POOL if kv else None,
        itl_mean_s=step if itl else None,
        prefill_tok_s=prefill_tok_s,
        kv_tokens_mean=held,
        prefix_hit_rate=0.25,
    )
    return StageEvidence(**(fields | kw))


def evidence(stages, ttft=None, outputs=(10, 20, 20, 50), cut=0.25) -> RunEvidence:
    rng = random.Random(1)
    low = ttft
    if low is None:  # TTFT at 1 user: one step with the prompt in it, a little noise
        low = tuple(
            (p, BASE + DECODE + PREFILL * p + rng.gauss(0, 0.0002))
            for p in [rng.randint(50, 2000) for _ in range(60)]
        )
    return RunEvidence(tuple(stages), low, tuple(outputs), cut, 2100, 16, "vllm")


def test_fit_line_recovers_a_line_and_its_fit():
    line = fit_line([1, 2, 3, 4], [3, 5, 7, 9])
    assert (line.intercept, line.slope, line.r2) == (pytest.approx(1), pytest.approx(2), pytest.approx(1))


def test_the_fit_recovers_step_prefill_cap_and_a_separable_kv_pool():
    # varied lengths per stage: state and tokens can be told apart
    fit = fit_twin(evidence([stage(8, 40), stage(24, 400), stage(48, 120), stage(96, 300)]))
    p = fit.params
    assert p["step.base_s"].value == pytest.approx(BASE, rel=0.02) and p["step.base_s"].status == FITTED
    assert p["step.decode_token_s"].value == pytest.approx(DECODE, rel=0.02)
    assert p["step.prefill_token_s"].value == pytest.approx(PREFILL, rel=0.1)
    assert p["step.prefill_token_s"].status == FITTED
    assert (p["engine.max_num_seqs"].value, p["engine.max_num_seqs"].status) == (CAP, FITTED)
    assert p["engine.kv_cache_tokens"].value == pytest.approx(POOL, rel=0.01)
    assert p["engine.seq_state_tokens"].value == pytest.approx(STATE, rel=0.01)
    assert p["engine.kv_cache_tokens"].status == FITTED
    assert p["engine.prefix_caching"].value is True
    assert fit.running_reached == CAP
    for param in p.values():  # every parameter says what it rests on and how well
        assert param.evidence and param.quality


def test_one_workload_leaves_the_pool_in_its_own_tokens_marked_extrapolated():
    fit = fit_twin(evidence([stage(8, 40), stage(24, 40), stage(48, 40), stage(96, 40)]))
    pool, state = fit.params["engine.kv_cache_tokens"], fit.params["engine.seq_state_tokens"]
    assert pool.status == state.status == EXTRAPOLATED
    assert "could not be told apart" in pool.evidence
    # the share of one running sequence is kept: 40 held tokens take what state + 40 take of the real pool
    assert 40 / pool.value == pytest.approx((STATE + 40) / POOL, rel=0.01)
    assert state.value == 0


def test_no_kv_gauge_refuses_kv_capacity_by_name():
    fit = fit_twin(evidence([stage(8, 40, kv=False), stage(48, 40, kv=False)]))
    for name in ("engine.kv_cache_tokens", "engine.seq_state_tokens"):
        p = fit.params[name]
        assert (p.value, p.status) == (None, REFUSED)
        assert "no KV-usage gauge" in p.evidence


def test_a_cap_never_reached_is_refused():
    fit = fit_twin(evidence([stage(8, 40), stage(24, 40), stage(48, 40)]))
    cap = fit.params["engine.max_num_seqs"]
    assert (cap.value, cap.status) == (None, REFUSED)
    assert "never reached: at most 48 running" in cap.evidence


def test_no_itl_or_one_batch_size_refuses_the_step_cost():
    fit = fit_twin(evidence([stage(8, 40, itl=False), stage(48, 40, itl=False)]))
    assert fit.params["step.base_s"].status == REFUSED and fit.running_reached is None
    fit = fit_twin(evidence([stage(96, 40), stage(128, 40)]))  # both pinned at 64 running
    assert fit.params["step.decode_token_s"].status == REFUSED


def test_prefill_below_the_noise_is_zero_and_extrapolated():
    rng = random.Random(2)
    noisy = tuple((p, 0.05 + rng.gauss(0, 0.01)) for p in [rng.randint(10, 18) for _ in range(60)])
    p = fit_twin(evidence([stage(8, 40), stage(48, 40)], ttft=noisy)).params["step.prefill_token_s"]
    assert (p.value, p.status) == (0.0, EXTRAPOLATED)
    assert "within its noise" in p.evidence


def test_no_prefix_counters_is_refused_and_lengths_are_the_records():
    fit = fit_twin(evidence([stage(8, 40, prefix_hit_rate=None), stage(48, 40, prefix_hit_rate=None)]))
    assert fit.params["engine.prefix_caching"].status == REFUSED
    assert fit.output_lengths == [(1.0, 10, 10), (2.0, 20, 20), (1.0, 50, 50)]
    assert "25% cut by max_tokens" in fit.params["lengths.output"].evidence


def test_many_lengths_become_quantile_bins_that_cover_every_one():
    outputs = list(range(1, 1001))
    comps = length_components(outputs)
    assert len(comps) <= 64
    assert sum(w for w, _, _ in comps) == len(outputs)
    assert comps[0][1] == 1 and comps[-1][2] == 1000


def test_an_itl_flat_within_its_noise_is_marked_extrapolated():
    flat = [stage(u, 40, itl_mean_s=0.13 + d) for u, d in ((1, 0.004), (2, -0.003), (4, 0.002), (8, -0.004))]
    decode = fit_twin(evidence(flat)).params["step.decode_token_s"]
    assert decode.status == EXTRAPOLATED and "did not grow measurably" in decode.evidence


def test_the_time_outside_the_engine_by_littles_law():
    """Users neither running nor waiting over QPS: a closed loop's requests in the client, on the
    wire and in the API server."""
    outside = [
        stage(u, 40, running_mean=u - 2.0, waiting_mean=0.0, qps=q)
        for u, q in ((4, 10.0), (8, 20.0), (12, 25.0))
    ]
    gap = fit_twin(evidence(outside)).params["client.gap_s"]
    assert (gap.value, gap.status) == (pytest.approx(2.0 / 20.0), FITTED)  # the median of 0.2, 0.1, 0.08
    bare = fit_twin(evidence([stage(8, 40, waiting_mean=None), stage(48, 40, waiting_mean=None)]))
    assert bare.params["client.gap_s"].status == REFUSED


def test_the_time_outside_the_engine_from_the_e2e_histograms_over_littles_law():
    """Where the server's e2e histogram gives each stage's client-less-server e2e, that is the gap
    (the gauges, read between steps, would say more: 2 of 8 users 'outside' here)."""
    stages = [
        stage(u, 40, running_mean=u - 2.0, waiting_mean=0.0, qps=20.0, outside_s=o)
        for u, o in ((4, 0.004), (8, -0.001), (12, 0.006))
    ]
    gap = fit_twin(evidence(stages)).params["client.gap_s"]
    assert (gap.value, gap.status) == (pytest.approx(0.004), FITTED)  # the median of 4, 0 (clipped), 6 ms
    assert "e2e histogram over the same requests" in gap.evidence and "0.0 ms" in gap.evidence


def test_the_prompts_are_counted_as_the_server_counted_them():
    ev = evidence([stage(8, 40), stage(48, 40)])
    counted = dataclasses.replace(ev, prompt_tokens=(30, 34, 38), workloads=("short_qa",))
    fit = fit_twin(counted)
    prompt = fit.params["lengths.prompt_tokens"]
    assert (prompt.value, prompt.status) == (pytest.approx(34.0), FITTED)
    assert "short_qa" in prompt.evidence and "30-38 tokens" in prompt.evidence
    assert fit.workloads == ("short_qa",)
    assert fit_twin(ev).params["lengths.prompt_tokens"].status == REFUSED  # no counts: prompts stay in words
