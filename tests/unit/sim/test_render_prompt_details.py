"""The simulator's cached prompt tokens: what its vLLM face sends with --enable-prompt-tokens-details
(and not without), and its prefix-cache counters agreeing with what it sends, preemptions included."""

from __future__ import annotations

import orjson

from swarm.sim.engine import FINISHED, Engine, Sequence, prompt_block_hashes
from swarm.sim.render import Output, PromptDetails, StreamRenderer, Tape, full_body
from tests.unit.sim.helpers import drain, small_profile


def _out(prompt: int = 100) -> Output:
    return Output("chatcmpl-1", 0, prompt, 4, 0, "length", 0)


def _usage_event(renderer: StreamRenderer, seq: Sequence | None) -> dict:
    raw = renderer.closing(4, seq)
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
    return orjson.loads(raw[6:-2])


def test_first_hit_once_per_request_even_when_preempted():
    # 8 blocks of 16: three 40-token prompts sharing two blocks, growing to 40 + 60 = 100 tokens
    # (7 blocks) each, so the engine preempts and re-admits; a re-admission's lookup is not counted
    eng = Engine(small_profile(kv_cache_tokens=128, max_model_len=112, max_num_batched_tokens=512))
    shared = [f"s{i}" for i in range(32)]
    seqs = [
        Sequence(f"r{k}", 40, 60, prompt_block_hashes(shared + [f"{k}-{i}" for i in range(8)], 16), 0.0)
        for k in range(3)
    ]
    eng.add(seqs[0])
    eng.complete(eng.schedule(0.0), 0.0)  # r0's prefill publishes its blocks
    for s in seqs[1:]:
        eng.add(s)
    drain(eng)
    assert eng.counters.preemptions > 0
    assert all(s.state == FINISHED for s in seqs)
    assert eng.counters.prefix_hits == sum(s.cached_tokens for s in seqs) > 0
    assert eng.counters.prefix_queries == sum(s.prompt_tokens for s in seqs)
    assert eng.counters.prompt_cached == eng.counters.prefix_hits


def test_vllm_usage_chunk_with_and_without_the_flag():
    tape = Tape.build(0, 0.0, "reasoning")
    seq = Sequence("a", 100, 4, (), 0.0)
    seq.cached_tokens = 64
    details = PromptDetails(block_size=16, caching=True)
    plain = StreamRenderer(tape, _out(), "m", "chat", continuous=True, merge=False)
    assert "prompt_tokens_details" not in _usage_event(plain, seq)["usage"]
    on = StreamRenderer(tape, _out(), "m", "chat", continuous=True, merge=False, prompt_details=details)
    usage = _usage_event(on, seq)["usage"]
    # chat: cached and created (96 tokens in full blocks, 64 of them were a hit)
    assert usage["prompt_tokens_details"] == {"cached_tokens": 64, "created_cache_tokens": 32}
    assert list(usage) == ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details"]
    # a running usage never carries it
    parts: list[bytes] = []
    on.tokens(0, 3, parts)
    assert all(b"prompt_tokens_details" not in p for p in parts)
    # with reasoning-token details: between completion_tokens and completion_tokens_details
    r = StreamRenderer(
        tape, _out(), "m", "chat", continuous=True, merge=False, details=True, prompt_details=details
    )
    assert list(_usage_event(r, seq)["usage"])[-2:] == ["prompt_tokens_details", "completion_tokens_details"]
    # completions: cached only; zero is sent, not left out
    seq.cached_tokens = 0
    comp = StreamRenderer(
        tape, _out(), "m", "completions", continuous=False, merge=False, prompt_details=details
    )
    assert _usage_event(comp, seq)["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


def test_vllm_non_streaming_body():
    tape = Tape.build(0, 0.0, "reasoning")
    seq = Sequence("a", 100, 4, (), 0.0)
    seq.cached_tokens = 48
    body = orjson.loads(full_body(tape, _out(), "m", "chat", "reasoning", False))
    assert body["usage"]["prompt_tokens_details"] is None
    d = PromptDetails(16, caching=False).of(seq, True)
    body = orjson.loads(full_body(tape, _out(), "m", "chat", "reasoning", False, prompt_details=d))
    assert body["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 48,
        "created_cache_tokens": 0,
        "multimodal_tokens": None,
    }
