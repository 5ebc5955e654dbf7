"""swarm/sim/engine.py: the simulated vLLM scheduler on a virtual clock (no sockets)."""

from __future__ import annotations

import pytest

from swarm.sim.engine import ABORTED, FINISHED, RUNNING, WAITING, Engine, Sequence, prompt_block_hashes
from tests.unit.sim.helpers import drain, small_profile


def test_engine_generates_exact_tokens_and_frees_kv():
    eng = Engine(small_profile())
    seqs = [Sequence(f"s{i}", 20 + i, 5 + i, (), 0.0) for i in range(6)]
    for s in seqs:
        eng.add(s)
    drain(eng)
    assert all(s.state == FINISHED and s.generated == s.target_tokens for s in seqs)
    assert eng.counters.generation_tokens == sum(s.target_tokens for s in seqs)
    assert eng.counters.prompt_tokens == sum(s.prompt_tokens for s in seqs)
    assert eng.pool.used == 0 and eng.kv_cache_usage == 0.0
    assert all(s.first_token_time <= s.last_token_time == s.finish_time for s in seqs)


def test_step_time_is_base_plus_per_token():
    eng = Engine(small_profile(max_num_batched_tokens=1000))
    for i in range(4):
        eng.add(Sequence(f"s{i}", 10, 3, (), 0.0))
    plan = eng.schedule(0.0)
    assert plan.prefill_tokens == 40 and plan.decode_tokens == 0
    eng.complete(plan, 0.0)
    plan = eng.schedule(0.0)
    assert (plan.prefill_tokens, plan.decode_tokens) == (0, 4)
    assert eng.step_seconds(plan) == pytest.approx(0.01 + 4 * 0.001)


def test_max_num_seqs_caps_running_and_queue_waits():
    eng = Engine(small_profile(max_num_seqs=2))
    seqs = [Sequence(f"s{i}", 10, 4, (), 0.0) for i in range(5)]
    for s in seqs:
        eng.add(s)
    plan = eng.schedule(0.0)
    assert len(plan.scheduled) == 2 and len(eng.running) == 2 and len(eng.waiting) == 3
    eng.complete(plan, 0.01)
    drain(eng, 0.01)
    assert seqs[4].scheduled_time > seqs[0].scheduled_time  # queued until a slot freed


def test_chunked_prefill_respects_token_budget():
    eng = Engine(small_profile(max_num_batched_tokens=64))
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
    p = small_profile(max_num_batched_tokens=4096, kv_cache_tokens=8192)
    eng = Engine(p)
    pieces = [f"t{i}" for i in range(100)]  # 6 full blocks of 16
    hashes = prompt_block_hashes(pieces, 16)
    assert len(hashes) == 6
    a = Sequence("a", 100, 3, hashes, 0.0)
    eng.add(a)
    drain(eng)
    assert eng.counters.prefix_hits == 0 and eng.counters.prefix_queries == 100
    b = Sequence("b", 100, 3, hashes, 0.0)
    eng.add(b)
    plan = eng.schedule(0.0)
    assert plan.prefill_tokens == 100 - 96  # 6 cached blocks skipped
    eng.complete(plan, 0.0)
    drain(eng)
    assert eng.counters.prefix_hits == 96 and eng.counters.prefix_queries == 200
    # a different prompt sharing the first 2 blocks hits only those
    other = prompt_block_hashes(pieces[:32] + [f"x{i}" for i in range(68)], 16)
    c = Sequence("c", 100, 3, other, 0.0)
    eng.add(c)
    assert eng.schedule(0.0).prefill_tokens == 100 - 32
    # no caching: no queries, no hits
    eng2 = Engine(p.with_overrides(prefix_caching=False))
    eng2.add(Sequence("d", 100, 3, (), 0.0))
    drain(eng2)
    assert eng2.counters.prefix_queries == 0


def test_preemption_recomputes_and_still_finishes_exactly():
    # 8 blocks of 16 tokens; each sequence grows to 20 + 60 = 80 tokens = 5 blocks
    eng = Engine(small_profile(kv_cache_tokens=128, max_model_len=96, max_num_batched_tokens=512))
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
    eng = Engine(small_profile(max_num_seqs=1))
    a, b = Sequence("a", 30, 50, (), 0.0), Sequence("b", 30, 50, (), 0.0)
    eng.add(a)
    eng.add(b)
    eng.complete(eng.schedule(0.0), 0.0)
    assert a.state == RUNNING and b.state == WAITING and eng.pool.used > 0
    eng.abort(b)
    eng.abort(a)
    assert a.state == b.state == ABORTED and eng.pool.used == 0 and not eng.running and not eng.waiting
    assert eng.schedule(0.0) is None


def test_without_chunked_prefill_a_prompt_waits_for_a_step_that_holds_it_whole():
    eng = Engine(small_profile(max_num_batched_tokens=512, chunked_prefill=False, kv_cache_tokens=4096))
    eng.add(Sequence("a", 300, 5, (), 0.0))
    eng.add(Sequence("b", 300, 5, (), 0.0))
    plan = eng.schedule(0.0)
    assert [s.id for s, _ in plan.scheduled] == ["a"] and plan.prefill_tokens == 300
    eng.complete(plan, 0.0)
    plan = eng.schedule(0.0)  # a's decode token + b's 300 would fit 512: b comes whole
    assert plan.prefill_tokens == 300 and plan.decode_tokens == 1
    chunked = Engine(small_profile(max_num_batched_tokens=512, kv_cache_tokens=4096))
    chunked.add(Sequence("a", 300, 5, (), 0.0))
    chunked.add(Sequence("b", 300, 5, (), 0.0))
    assert chunked.schedule(0.0).prefill_tokens == 512  # b's first 212 tokens ride along


def test_ubatches_pay_the_fixed_step_cost_each():
    eng = Engine(small_profile(max_num_batched_tokens=512, ubatch_tokens=128, kv_cache_tokens=4096))
    eng.add(Sequence("a", 300, 2, (), 0.0))
    plan = eng.schedule(0.0)
    assert plan.tokens == 300 and eng.step_seconds(plan) == pytest.approx(3 * 0.01)  # 128 + 128 + 44
    eng.complete(plan, 0.0)
    assert eng.step_seconds(eng.schedule(0.0)) == pytest.approx(0.01 + 0.001)  # one decode token


def test_reset_prefix_cache_forgets_the_blocks_no_one_holds():
    eng = Engine(small_profile(max_num_batched_tokens=4096, kv_cache_tokens=8192))
    hashes = prompt_block_hashes([f"t{i}" for i in range(100)], 16)
    eng.add(Sequence("a", 100, 3, hashes, 0.0))
    drain(eng)
    assert eng.pool.refs and eng.reset_prefix_cache() is True and not eng.pool.refs
    assert eng.pool.used == 0
    eng.add(Sequence("b", 100, 3, hashes, 0.0))
    plan = eng.schedule(0.0)
    assert plan.prefill_tokens == 100  # cold again
    eng.complete(plan, 0.01)  # b publishes its prompt's blocks and holds them while it runs
    held = dict(eng.pool.refs)
    assert held and eng.reset_prefix_cache() is False and eng.pool.refs == held


def test_a_cache_salt_shares_no_block_with_another_salt_or_none():
    pieces = [f"t{i}" for i in range(64)]
    plain = prompt_block_hashes(pieces, 16)
    assert prompt_block_hashes(pieces, 16, None) == plain and len(plain) == 4
    a, b = prompt_block_hashes(pieces, 16, "a"), prompt_block_hashes(pieces, 16, "b")
    assert a == prompt_block_hashes(pieces, 16, "a")  # the same salt shares its blocks
    assert not set(a) & set(plain) and not set(a) & set(b)
    eng = Engine(small_profile(max_num_batched_tokens=4096, kv_cache_tokens=8192))
    eng.add(Sequence("x", 64, 3, a, 0.0))
    drain(eng)
    for rid, hashes, hit in (("y", b, 0), ("z", a, 48)):  # (the last block is always recomputed)
        seq = Sequence(rid, 64, 3, hashes, 0.0)
        eng.add(seq)
        drain(eng)
        assert seq.cached_tokens == hit, rid
