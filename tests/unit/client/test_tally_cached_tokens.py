"""Cached prompt tokens per request: `usage.prompt_tokens_details.cached_tokens` as each server sends it.

The chunk shapes are the servers' own: vLLM 0.32 with `--enable-prompt-tokens-details` puts the
details on the final usage chunk only (a running usage leaves them out) and sends 0 too;
llama.cpp (b11434) puts them on its usage chunk and `cache_n` in `timings`.
"""

from __future__ import annotations

from swarm.client.tally import cached_tokens
from tests.unit.client.test_dialects import LLAMA, VLLM, chunk, run


def _final_usage(prompt: int, completion: int, details: dict | None) -> dict:
    c = chunk(choices=False, usage=(prompt, completion))
    if details is not None:
        c["usage"]["prompt_tokens_details"] = details
    return c


def test_vllm_final_usage_chunk_gives_cached_tokens_under_a_running_usage() -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}, usage=(40, 0)),
        chunk({"content": "a"}, usage=(40, 1)),
        chunk({"content": "b"}, usage=(40, 2)),
        chunk({"content": "c"}, finish="length", usage=(40, 3)),
        _final_usage(40, 3, {"cached_tokens": 32, "created_cache_tokens": 0}),
    ]
    _, r = run(chunks, VLLM)
    assert (r.prompt_tokens, r.cached_tokens, r.output_tokens) == (40, 32, 3)


def test_zero_is_kept_and_absent_is_none() -> None:
    _, zero = run([chunk({"content": "a"}), _final_usage(40, 1, {"cached_tokens": 0})], VLLM)
    assert zero.cached_tokens == 0
    # vLLM without --enable-prompt-tokens-details: usage without the details
    _, absent = run([chunk({"content": "a"}), _final_usage(40, 1, None)], VLLM)
    assert absent.cached_tokens is None and absent.prompt_tokens == 40
    _, null = run([chunk({"content": "a"}), _final_usage(40, 1, {"cached_tokens": None})], VLLM)
    assert null.cached_tokens is None
    # no usage at all: counted from chunks, nothing said about the cache
    _, none = run([chunk({"content": "a"}), chunk({"content": "b"}, finish="stop")], VLLM)
    assert none.cached_tokens is None and not none.tokens_from_usage


def test_llamacpp_usage_and_timings_agree() -> None:
    usage = _final_usage(13, 2, {"cached_tokens": 10})
    usage["timings"] = {"prompt_n": 3, "cache_n": 10, "predicted_n": 2}
    _, r = run([chunk({"content": "hi"}), chunk({}, finish="stop"), usage], LLAMA)
    assert (r.prompt_tokens, r.cached_tokens) == (13, 10)
    # without include_usage llama.cpp sends only timings, on the finish chunk
    timings = {"prompt_n": 3, "cache_n": 10, "predicted_n": 2}
    _, t = run([chunk({"content": "hi"}), chunk({}, finish="stop", timings=timings)], LLAMA)
    assert (t.prompt_tokens, t.cached_tokens) == (13, 10)
    _, old = run(
        [chunk({"content": "hi"}), chunk({}, finish="stop", timings={"prompt_n": 3, "predicted_n": 2})], LLAMA
    )
    assert old.cached_tokens is None


def test_cached_tokens_reader() -> None:
    assert cached_tokens({"prompt_tokens": 5}) is None
    assert cached_tokens({"prompt_tokens_details": None}) is None
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 4}}) == 4
