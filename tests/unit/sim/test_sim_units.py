"""The simulator's parts without sockets: profiles, engine, rendering, faults, metrics (the tokenizer it
counts with, swarm.core.tokens: tests/unit/core/test_tokens.py)."""

from __future__ import annotations

import random

import orjson
import pytest

from swarm.core.errors import UsageError
from swarm.sim.calibrate import CHAT_PROMPTS, SHORT_QA_PROMPTS, closed_loop, seed_script
from swarm.sim.engine import ABORTED, FINISHED, RUNNING, WAITING, Engine, Sequence, prompt_block_hashes
from swarm.sim.faults import FaultPlan, parse_fault
from swarm.sim.metrics import TTFT_BUCKETS, SimMetrics, buckets_1_2_5
from swarm.sim.profile import LengthComponent, LengthDist, Profile, StepCost, load_profile, parse_profile
from swarm.sim.render import TAPE_MASK, Output, StreamRenderer, Tape


# ---- profiles ----------------------------------------------------------------------------------
def test_bundled_profiles_load_and_overrides_apply():
    inst = load_profile("instant")
    assert inst.step.instant
    rtx = load_profile("rtx5090x4-qwen3.6-27b")
    assert rtx.max_num_seqs == 256 and rtx.max_model_len == 16384 and not rtx.step.instant
    p = rtx.with_overrides(max_num_seqs=8, prefix_caching=False, utf8_split=None)
    assert (p.max_num_seqs, p.prefix_caching, p.utf8_split) == (8, False, rtx.utf8_split)


def test_user_profile_file_and_errors(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[engine]\nmax_num_seqs = 3\n[lengths]\noutput = { dist = "const", value = 7 }\n')
    p = load_profile(str(f))
    assert p.name == "mine" and p.max_num_seqs == 3
    assert p.draw_output(random.Random(0), 100, thinking=False) == (7, 0, "stop")
    assert p.draw_output(random.Random(0), 5, thinking=False) == (5, 0, "length")
    assert p.draw_output(random.Random(0), 100, thinking=False, min_tokens=20) == (20, 0, "stop")
    assert p.draw_output(random.Random(0), 100, thinking=False, ignore_eos=True) == (100, 0, "length")
    with pytest.raises(UsageError, match="unknown profile"):
        load_profile("no-such-profile")
    f.write_text("[engine]\nmax_num_sequences = 3\n")
    with pytest.raises(UsageError, match="unknown key"):
        load_profile(str(f))
    with pytest.raises(UsageError, match="kv_cache_tokens"):
        parse_profile({"engine": {"kv_cache_tokens": 100, "max_model_len": 4096}}, "tiny")


def test_thinking_lengths_come_first_and_are_cut_by_max_tokens():
    p = load_profile("instant")
    rng = random.Random(1)
    for _ in range(50):
        total, reasoning, finish = p.draw_output(rng, 4000, thinking=True)
        assert 1800 <= reasoning <= 2300 and total > reasoning and finish == "stop"
    total, reasoning, finish = p.draw_output(rng, 1000, thinking=True)
    assert (total, reasoning, finish) == (1000, 1000, "length")


def test_length_mixture_gives_both_stop_and_length():
    dist = LengthDist(
        (
            LengthComponent(weight=1, dist="uniform", low=10, high=30),
            LengthComponent(weight=1, dist="lognormal", median=300, sigma=0.5, min=51),
        )
    )
    rng = random.Random(0)
    caps = [min(50, dist.sample(rng)) for _ in range(2000)]
    assert 0.4 < sum(c == 50 for c in caps) / len(caps) < 0.6


# ---- engine ------------------------------------------------------------------------------------
def _profile(**kw) -> Profile:
    base = dict(
        name="t",
        max_num_seqs=8,
        max_num_batched_tokens=64,
        kv_cache_tokens=1024,
        max_model_len=512,
        block_size=16,
        step=StepCost(base_s=0.01, decode_token_s=0.001),
    )
    base.update(kw)
    p = Profile(**base)
    p.validate()
    return p


def _drain(engine: Engine, t: float = 0.0, max_steps: int = 100000) -> float:
    for _ in range(max_steps):
        plan = engine.schedule(t)
        if plan is None:
            return t
        t += engine.step_seconds(plan)
        engine.complete(plan, t)
    raise AssertionError("engine did not drain")


def test_engine_generates_exact_tokens_and_frees_kv():
    eng = Engine(_profile())
    seqs = [Sequence(f"s{i}", 20 + i, 5 + i, (), 0.0) for i in range(6)]
    for s in seqs:
        eng.add(s)
    _drain(eng)
    assert all(s.state == FINISHED and s.generated == s.target_tokens for s in seqs)
    assert eng.counters.generation_tokens == sum(s.target_tokens for s in seqs)
    assert eng.counters.prompt_tokens == sum(s.prompt_tokens for s in seqs)
    assert eng.pool.used == 0 and eng.kv_cache_usage == 0.0
    assert all(s.first_token_time <= s.last_token_time == s.finish_time for s in seqs)


def test_step_time_is_base_plus_per_token():
    eng = Engine(_profile(max_num_batched_tokens=1000))
    for i in range(4):
        eng.add(Sequence(f"s{i}", 10, 3, (), 0.0))
    plan = eng.schedule(0.0)
    assert plan.prefill_tokens == 40 and plan.decode_tokens == 0
    eng.complete(plan, 0.0)
    plan = eng.schedule(0.0)
    assert (plan.prefill_tokens, plan.decode_tokens) == (0, 4)
    assert eng.step_seconds(plan) == pytest.approx(0.01 + 4 * 0.001)


def test_max_num_seqs_caps_running_and_queue_waits():
    eng = Engine(_profile(max_num_seqs=2))
    seqs = [Sequence(f"s{i}", 10, 4, (), 0.0) for i in range(5)]
    for s in seqs:
        eng.add(s)
    plan = eng.schedule(0.0)
    assert len(plan.scheduled) == 2 and len(eng.running) == 2 and len(eng.waiting) == 3
    eng.complete(plan, 0.01)
    _drain(eng, 0.01)
    assert seqs[4].scheduled_time > seqs[0].scheduled_time  # queued until a slot freed


def test_chunked_prefill_respects_token_budget():
    eng = Engine(_profile(max_num_batched_tokens=64))
    seq = Sequence("long", 200, 2, (), 0.0)
    eng.add(seq)
    steps = 0
    while seq.generated == 0:
        plan = eng.schedule(0.0)
        assert plan.tokens <= 64
        eng.complete(plan, 0.0)
        steps += 1
    assert steps == 4  # 64 + 64 + 64 + 8


def test_prefix_cache_hits_skip_prefill():
    p = _profile(max_num_batched_tokens=4096, kv_cache_tokens=8192)
    eng = Engine(p)
    pieces = [f"t{i}" for i in range(100)]  # 6 full blocks of 16
    hashes = prompt_block_hashes(pieces, 16)
    assert len(hashes) == 6
    a = Sequence("a", 100, 3, hashes, 0.0)
    eng.add(a)
    _drain(eng)
    assert eng.counters.prefix_hits == 0 and eng.counters.prefix_queries == 100
    b = Sequence("b", 100, 3, hashes, 0.0)
    eng.add(b)
    plan = eng.schedule(0.0)
    assert plan.prefill_tokens == 100 - 96  # 6 cached blocks skipped
    eng.complete(plan, 0.0)
    _drain(eng)
    assert eng.counters.prefix_hits == 96 and eng.counters.prefix_queries == 200
    # a different prompt sharing the first 2 blocks hits only those
    other = prompt_block_hashes(pieces[:32] + [f"x{i}" for i in range(68)], 16)
    c = Sequence("c", 100, 3, other, 0.0)
    eng.add(c)
    assert eng.schedule(0.0).prefill_tokens == 100 - 32
    # no caching: no queries, no hits
    eng2 = Engine(p.with_overrides(prefix_caching=False))
    eng2.add(Sequence("d", 100, 3, (), 0.0))
    _drain(eng2)
    assert eng2.counters.prefix_queries == 0


def test_preemption_recomputes_and_still_finishes_exactly():
    # 8 blocks of 16 tokens; each sequence grows to 20 + 60 = 80 tokens = 5 blocks
    eng = Engine(_profile(kv_cache_tokens=128, max_model_len=96, max_num_batched_tokens=512))
    seqs = [Sequence(f"s{i}", 20, 60, (), 0.0) for i in range(3)]
    for s in seqs:
        eng.add(s)
    max_usage = 0.0
    t = 0.0
    while (plan := eng.schedule(t)) is not None:
        t += eng.step_seconds(plan)
        eng.complete(plan, t)
        max_usage = max(max_usage, eng.kv_cache_usage)
        assert eng.pool.used <= eng.pool.num_blocks
    assert eng.counters.preemptions > 0 and max_usage == 1.0
    assert all(s.state == FINISHED and s.generated == 60 for s in seqs)
    assert eng.counters.generation_tokens == 180 and eng.pool.used == 0


def test_abort_frees_blocks_wherever_the_sequence_is():
    eng = Engine(_profile(max_num_seqs=1))
    a, b = Sequence("a", 30, 50, (), 0.0), Sequence("b", 30, 50, (), 0.0)
    eng.add(a)
    eng.add(b)
    eng.complete(eng.schedule(0.0), 0.0)
    assert a.state == RUNNING and b.state == WAITING and eng.pool.used > 0
    eng.abort(b)
    eng.abort(a)
    assert a.state == b.state == ABORTED and eng.pool.used == 0 and not eng.running and not eng.waiting
    assert eng.schedule(0.0) is None


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


# ---- rendering ---------------------------------------------------------------------------------
def _events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return [e[len(b"data: ") :] for e in raw.split(b"\n\n") if e]


def test_stream_chunks_have_vllm_layout_and_exact_running_usage():
    tape = Tape.build(0, 0.3, "reasoning")
    out = Output("chatcmpl-x", 1700000000, 12, 10, 4, "stop", 5)
    r = StreamRenderer(tape, out, "m", "chat", continuous=True, merge=False)
    parts = [r.role_chunk()]
    r.tokens(0, 10, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["usage"]["completion_tokens"] for c in chunks] == list(range(11))
    assert all(set(c["choices"][0]["delta"]) == {"reasoning"} for c in chunks[1:5])
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in chunks[5:])
    assert (
        chunks[-1]["choices"][0]["finish_reason"] == "stop"
        and chunks[-1]["choices"][0]["delta"]["content"] == ""
    )
    assert "stop_reason" not in chunks[1]["choices"][0] and chunks[-1]["choices"][0]["stop_reason"] is None
    assert all(c["usage"]["total_tokens"] == 12 + c["usage"]["completion_tokens"] for c in chunks)


def test_merge_holds_back_empty_tokens_but_usage_stays_exact():
    tape = Tape.build(0, 0.5, "reasoning_content")
    empties = sum(tape.empty[k & TAPE_MASK] for k in range(0, 99))
    out = Output("chatcmpl-x", 1, 5, 100, 60, "length", 0)
    r = StreamRenderer(tape, out, "m", "chat", continuous=True, merge=True)
    parts: list[bytes] = []
    r.tokens(0, 100, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert len(chunks) == 100 - empties  # the last token always gets its (finish) chunk
    usage = [c["usage"]["completion_tokens"] for c in chunks]
    assert usage == sorted(usage) and usage[-1] == 100
    assert all(next(iter(c["choices"][0]["delta"].values()), "x") != "" for c in chunks[:-1])
    assert "reasoning_content" in chunks[0]["choices"][0]["delta"]


def test_completion_chunks_and_bad_chunk():
    tape = Tape.build(0, 0.0, "reasoning")
    out = Output("cmpl-x", 1, 3, 3, 0, "length", 0)
    r = StreamRenderer(tape, out, "m", "completions", continuous=False, merge=False)
    parts: list[bytes] = []
    r.tokens(0, 3, parts)
    chunks = [orjson.loads(e) for e in _events(b"".join(parts))]
    assert [c["object"] for c in chunks] == ["text_completion"] * 3
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]
    assert all("stop_reason" in c["choices"][0] and "usage" not in c for c in chunks)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(_events(r.bad_chunk())[0])


# ---- faults and metrics -----------------------------------------------------------------------
def test_fault_specs():
    assert parse_fault("cut=0.25") == ("cut", 0.25)
    for bad in ("cut", "nope=0.1", "cut=x", "cut=1.5"):
        with pytest.raises(UsageError):
            parse_fault(bad)
    with pytest.raises(UsageError, match="add up"):
        FaultPlan.from_specs(["cut=0.6", "stall=0.6"], 1.0)
    plan = FaultPlan.from_specs(["cut=0.5", "stall=0.5"], 1.0)
    rng = random.Random(0)
    kinds = [plan.draw(rng) for _ in range(1000)]
    assert set(kinds) == {"cut", "stall"} and 400 < kinds.count("cut") < 600
    assert FaultPlan().draw(rng) is None


def test_metric_buckets_and_success_only_counts():
    assert buckets_1_2_5(100) == (1, 2, 5, 10, 20, 50, 100)
    eng = Engine(_profile())
    m = SimMetrics(eng, "m")
    seq = Sequence("a", 10, 2, (), 0.0)
    eng.add(seq)
    _drain(eng)
    m.observe_success(seq, "stop")
    text = m.render().decode()
    assert 'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 1.0' in text
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 0.0' in text
    assert 'vllm:generation_tokens_total{engine="0",model_name="m"} 2.0' in text
    les = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("vllm:time_to_first_token_seconds_bucket")
    ]
    assert les == [*(str(float(b)) for b in TTFT_BUCKETS), "+Inf"]


def test_several_models_share_one_engine_and_count_apart():
    from swarm.sim.cli import served_models
    from swarm.sim.protocol import ApiError, check_model

    assert served_models(None) == ("sim-model",)
    assert served_models(["base", "a,b"]) == ("base", "a", "b")
    for bad in (["a,,b"], ["a", "a"], [""]):
        with pytest.raises(UsageError):
            served_models(bad)
    assert check_model({}, ("base", "a")) == "base" and check_model({"model": "a"}, ("base", "a")) == "a"
    with pytest.raises(ApiError) as e:
        check_model({"model": "x"}, ("base", "a"))
    assert e.value.status == 404 and "Valid aliases: base, a." in e.value.body().decode()

    eng = Engine(_profile())
    m = SimMetrics(eng, ("base", "a"))
    seqs = [Sequence(f"s{i}", 10 + i, 2 + i, (), 0.0) for i in range(3)]
    for seq, model in zip(seqs, ("base", "a", "a"), strict=True):
        seq.tally = m.counters(model)
        eng.add(seq)
    _drain(eng)
    for seq, model in zip(seqs, ("base", "a", "a"), strict=True):
        m.observe_success(seq, "length", model)
    text = m.render().decode()
    assert 'vllm:prompt_tokens_total{engine="0",model_name="base"} 10.0' in text
    assert 'vllm:prompt_tokens_total{engine="0",model_name="a"} 23.0' in text
    assert 'vllm:generation_tokens_total{engine="0",model_name="a"} 7.0' in text
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="a"} 2.0' in text
    assert eng.counters.prompt_tokens == 33 and eng.counters.generation_tokens == 9  # the engine's sum
    assert 'vllm:num_requests_running{engine="0",model_name="base"}' in text
    assert 'vllm:num_requests_running{engine="0",model_name="a"}' not in text  # one engine: the base's


def test_ttft_histogram_is_observed_when_the_first_token_is_made():
    """vLLM observes time_to_first_token_seconds in the iteration that produces the first token:
    a long answer is in the histogram long before it finishes, and an aborted one stays in it."""
    eng = Engine(_profile())
    metrics = SimMetrics(eng, "m")
    ttft = metrics.series["m"].ttft
    long_one = Sequence("long", 20, 500, (), 0.0)
    cut_one = Sequence("cut", 20, 500, (), 0.0)
    for s in (long_one, cut_one):
        s.tally = metrics.counters("m")
        eng.add(s)
    t = 0.0
    while long_one.first_token_time is None:
        plan = eng.schedule(t)
        t += eng.step_seconds(plan)
        eng.complete(plan, t)
    assert long_one.state == RUNNING and ttft.count == 2
    assert ttft.sum == pytest.approx(long_one.first_token_time + cut_one.first_token_time)
    eng.abort(cut_one)
    _drain(eng, t)
    metrics.observe_success(long_one, "length", "m")
    assert long_one.state == FINISHED and ttft.count == 2  # not observed again at the finish
