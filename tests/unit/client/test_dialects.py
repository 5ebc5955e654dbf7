"""swarm.client.dialects: request bodies and reading chunk streams, on scripted chunks and a fake clock."""

from __future__ import annotations

import random

import orjson
import pytest

from swarm.client.dialects import (
    DIALECTS,
    detect_dialect,
    error_message,
    first_model,
    get_dialect,
)
from swarm.client.tally import StreamTally
from swarm.core.errors import BadChunk, UsageError
from swarm.core.records import RequestRecord

VLLM, LLAMA, OPENAI = DIALECTS["vllm"], DIALECTS["llamacpp"], DIALECTS["openai"]


def chunk(delta: dict | None = None, finish: str | None = None, usage: tuple[int, int] | None = None,
          text: str | None = None, choices: bool = True, **extra) -> dict:  # fmt: skip
    c: dict = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}
    if choices:
        choice: dict = {"index": 0, "logprobs": None, "finish_reason": finish}
        if text is not None:
            choice["text"] = text
        else:
            choice["delta"] = delta if delta is not None else {}
        c["choices"] = [choice]
    else:
        c["choices"] = []
    if usage is not None:
        c["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    c.update(extra)
    return c


def run(chunks: list[dict], dialect=VLLM, chat: bool = True, t0: float = 100.0, dt: float = 0.01,
        end_gap: float = 0.005) -> tuple[StreamTally, RequestRecord]:  # fmt: skip
    """Feed `chunks` one per `dt` seconds (first at t0 + dt); [DONE] `end_gap` after the last."""
    tally = StreamTally(dialect, chat)
    t = t0
    for c in chunks:
        t += dt
        assert tally.feed(orjson.loads(orjson.dumps(c)), t) is True
    rec = RequestRecord(workload="w", start_wall_s=0.0)
    tally.fill(rec, t0, t + end_gap)
    return tally, rec


def test_vllm_running_usage_counts_an_empty_token_and_skips_the_role_chunk() -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}, usage=(9, 0)),
        chunk({"content": ""}, usage=(9, 1)),  # half a character: a real token
        chunk({"content": "你"}, usage=(9, 2)),
        chunk({"content": "好"}, usage=(9, 3), finish="length"),
        chunk(choices=False, usage=(9, 3)),
    ]
    tally, r = run(chunks)
    assert r.ttft_s == pytest.approx(0.02)  # the empty-content chunk, not the role chunk
    assert r.ttfa_s == pytest.approx(0.02)
    assert r.itl_s == pytest.approx([0.01, 0.01])
    assert r.e2e_s == pytest.approx(0.055)
    assert (r.output_tokens, r.prompt_tokens, r.reasoning_tokens) == (3, 9, 0)
    assert r.tokens_from_usage and r.finish_reason == "length"
    assert r.tpot_s == pytest.approx((0.055 - 0.02) / 2)
    assert tally.response_id == "chatcmpl-1"


def test_chunk_structure_fallback_without_running_usage() -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": ""}),  # after the role chunk an empty content is a token
        chunk({"content": "a"}),
        chunk({}, finish="stop"),  # llama.cpp-style finish chunk: no token
        chunk(choices=False, usage=(5, 2)),
    ]
    _, r = run(chunks, OPENAI)
    assert r.ttft_s == pytest.approx(0.02)
    assert len(r.itl_s) == 1 and r.output_tokens == 2 and r.tokens_from_usage


def test_no_usage_at_all_counts_chunks_and_flags_the_record() -> None:
    chunks = [chunk({"role": "assistant", "content": ""}), chunk({"content": "a"}), chunk({"content": "b"})]
    _, r = run(chunks, OPENAI)
    assert r.output_tokens == 2 and r.tokens_from_usage is False and r.prompt_tokens is None


def test_reasoning_parser_multi_token_chunks() -> None:
    """REFERENCE §2: role chunk, ONE reasoning chunk at 6 tokens, then `delta: {}` at 8."""
    chunks = [
        chunk({"role": "assistant", "content": ""}, usage=(4, 0)),
        chunk({"reasoning": "thinking"}, usage=(4, 6)),
        chunk({}, finish="length", usage=(4, 8)),
        chunk(choices=False, usage=(4, 8)),
    ]
    _, r = run(chunks)
    assert r.ttft_s == pytest.approx(0.02) and r.ttfa_s is None
    assert (r.output_tokens, r.reasoning_tokens) == (8, 8)
    assert r.itl_s == pytest.approx([0.01])


@pytest.mark.parametrize(
    "fields", [("reasoning",), ("reasoning_content",), ("reasoning", "reasoning_content")]
)
@pytest.mark.parametrize("dialect", ["vllm", "llamacpp", "openai"])
@pytest.mark.parametrize("running", [True, False])
def test_every_reasoning_field_gives_the_same_split(
    fields: tuple[str, ...], dialect: str, running: bool
) -> None:
    if dialect == "llamacpp" and fields == ("reasoning",):
        pytest.skip("llama.cpp sends reasoning_content")
    pieces = [("r", "Let"), ("r", ""), ("r", " me"), ("c", ""), ("c", "答"), ("c", "案")]
    chunks = [chunk({"role": "assistant", "content": ""}, usage=(3, 0) if running else None)]
    for i, (kind, text) in enumerate(pieces, 1):
        delta = {f: text for f in fields} if kind == "r" else {"content": text}
        chunks.append(
            chunk(delta, usage=(3, i) if running else None, finish="stop" if i == len(pieces) else None)
        )
    _, r = run(chunks, get_dialect(dialect))
    assert (r.output_tokens, r.reasoning_tokens) == (6, 3)
    assert r.ttft_s == pytest.approx(0.02) and r.ttfa_s == pytest.approx(0.05)


def test_merged_reasoning_boundary_chunk() -> None:
    """A chunk that carries the swallowed `</think>` and the first answer token: 1 answer token."""
    chunks = [
        chunk({"role": "assistant", "content": ""}, usage=(3, 0)),
        chunk({"reasoning": "a"}, usage=(3, 1)),
        chunk({"reasoning": "b"}, usage=(3, 2)),
        chunk({"content": "\n\n"}, usage=(3, 4)),
        chunk({"content": "x"}, usage=(3, 5), finish="stop"),
    ]
    _, r = run(chunks)
    assert (r.output_tokens, r.reasoning_tokens) == (5, 3)
    assert r.ttfa_s == pytest.approx(0.04)


def test_think_tags_inside_content_are_reasoning() -> None:
    pieces = ["<th", "ink>", "想", "一想", "</th", "ink>", "\n\n", "答", "案"]
    chunks = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in pieces]
    _, r = run(chunks, OPENAI)
    assert r.reasoning_tokens == 6 and r.output_tokens == 9
    assert r.ttft_s == pytest.approx(0.02)
    assert r.ttfa_s == pytest.approx(0.08)  # the first token after </think>


@pytest.mark.parametrize("first", ["", " ", "<", "<th"])
def test_undecided_leading_content_that_is_an_answer(first: str) -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": first}),
        chunk({"content": "ok"}),
    ]
    _, r = run(chunks, OPENAI)
    assert r.reasoning_tokens == 0 and r.ttfa_s == pytest.approx(0.02)


def test_stream_ending_undecided_is_an_answer() -> None:
    _, r = run([chunk({"role": "assistant", "content": ""}), chunk({"content": ""}, finish="length")], OPENAI)
    assert r.ttfa_s == pytest.approx(0.02) and r.output_tokens == 1 and r.reasoning_tokens == 0


def test_llamacpp_timings_give_the_counts() -> None:
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk({"reasoning_content": "hm"}),
        chunk({"content": "hi"}),
        chunk({}, finish="stop", timings={"prompt_n": 3, "cache_n": 10, "predicted_n": 2}),
    ]
    _, r = run(chunks, LLAMA)
    assert (r.output_tokens, r.prompt_tokens, r.reasoning_tokens) == (2, 13, 1)
    assert r.tokens_from_usage and r.finish_reason == "stop"


def test_usage_reasoning_details_win() -> None:
    usage_chunk = chunk(choices=False, usage=(2, 3))
    usage_chunk["usage"]["completion_tokens_details"] = {"reasoning_tokens": 2}
    _, r = run(
        [chunk({"content": "a"}), chunk({"content": "b"}), chunk({"content": "c"}), usage_chunk], OPENAI
    )
    assert r.reasoning_tokens == 2


def test_completions_chunks() -> None:
    chunks = [
        chunk(text=""),
        chunk(text="a"),
        chunk(text="", finish="stop"),
        chunk(choices=False, usage=(2, 2)),
    ]
    _, r = run(chunks, OPENAI, chat=False)
    assert r.ttft_s == pytest.approx(0.01)  # completions have no role chunk: "" is a token
    assert r.output_tokens == 2 and len(r.itl_s) == 1
    _, r = run(
        [c | {"usage": {"completion_tokens": i}} for i, c in enumerate(chunks[:3], 1)], VLLM, chat=False
    )
    assert len(r.itl_s) == 2  # with running usage the final "" is a token too


def test_error_object_in_the_stream() -> None:
    tally = StreamTally(VLLM)
    assert tally.feed(chunk({"content": "a"}, usage=(1, 1)), 1.0)
    assert (
        tally.feed({"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}, 2.0)
        is False
    )
    assert tally.error == "engine died"


@pytest.mark.parametrize(
    "obj",
    [
        [1, 2],
        "x",
        3,
        None,
        {"id": "x"},
        {"choices": "abc"},
        {"choices": [{"index": 0}]},
        {"choices": [{"delta": "text"}]},
        {"choices": None},
    ],
)
def test_bad_chunks(obj: object) -> None:
    with pytest.raises(BadChunk):
        StreamTally(VLLM).feed(obj, 1.0)


def test_timing_invariants_on_random_streams() -> None:
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 40)
        running = rng.random() < 0.5
        chunks = [chunk({"role": "assistant", "content": ""}, usage=(1, 0) if running else None)]
        ct = 0
        for _ in range(n):
            ct += rng.randint(1, 3) if running else 1
            chunks.append(chunk({"content": rng.choice(["", "a", "字"])}, usage=(1, ct) if running else None))
        _, r = run(chunks, VLLM, dt=rng.uniform(0.001, 0.05))
        assert len(r.itl_s) == n - 1
        assert sum(r.itl_s) == pytest.approx(r.e2e_s - r.ttft_s - 0.005)
        assert r.output_tokens == (ct if running else n)


def test_request_bodies() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    body = orjson.loads(VLLM.body(endpoint="chat", model="m", messages=msgs, prompt=None, max_tokens=5,
                                  thinking=False, ignore_eos=True))  # fmt: skip
    assert body == {
        "model": "m",
        "messages": msgs,
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": True,
    }
    body = orjson.loads(OPENAI.body(endpoint="chat", model=None, messages=msgs, prompt=None, max_tokens=5,
                                    thinking=True))  # fmt: skip
    assert body == {
        "messages": msgs,
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body = orjson.loads(LLAMA.body(endpoint="completions", model="m", messages=None, prompt="p", max_tokens=5,
                                   thinking=True))  # fmt: skip
    assert body["prompt"] == "p" and "messages" not in body and "chat_template_kwargs" not in body
    assert not OPENAI.ignore_eos and VLLM.ignore_eos and LLAMA.ignore_eos  # --ignore-eos refused for openai


def test_model_list_helpers() -> None:
    vllm = {"data": [{"id": "qwen", "owned_by": "vllm", "max_model_len": 16384}]}
    assert detect_dialect(vllm) == "vllm" and first_model(vllm) == "qwen"
    assert detect_dialect({"data": [{"id": "x", "owned_by": "llamacpp"}]}) == "llamacpp"
    assert detect_dialect({"data": [{"id": "gpt", "owned_by": "openai"}]}) == "openai"
    assert detect_dialect("nonsense") == "openai" and first_model({"data": []}) is None
    with pytest.raises(UsageError, match="unknown dialect"):
        get_dialect("tensorflow")


def test_error_messages() -> None:
    assert error_message({"error": {"message": "bad", "code": 400}}) == "bad"
    assert error_message({"error": "Unauthorized"}) == "Unauthorized"
    assert (
        error_message({"object": "error", "message": "too long", "type": "BadRequestError", "code": 400})
        == "too long"
    )
    assert error_message({"detail": "Not Found"}) == "Not Found"
    assert error_message("plain text") == "plain text"


def test_fast_path_reads_every_stream_as_the_general_path() -> None:
    """StreamTally.feed's fast path (answer chunks under a running usage) changes nothing: on random
    streams mixing role, reasoning, answer, empty, text-less and finishing chunks, with and without
    usage, the record equals the one built by `feed_general` alone."""
    rng = random.Random(9)
    deltas = [
        {"content": "a"},
        {"content": ""},
        {"content": "字"},
        {"reasoning": "r"},
        {"reasoning_content": "r"},
        {"content": "a", "reasoning": "r"},
        {"role": "assistant", "content": ""},
        {},
        {"content": None},
        {"content": "<think>"},
        {"content": "</think>x"},
        {"content": "b", "tool_calls": []},
    ]
    for _ in range(400):
        running = rng.random() < 0.8
        ct = 0
        chunks = [chunk({"role": "assistant", "content": ""}, usage=(5, 0) if running else None)]
        for _ in range(rng.randint(1, 30)):
            ct += rng.choice([0, 1, 1, 1, 2])
            usage = (5, ct) if running and rng.random() < 0.95 else None
            chunks.append(
                chunk(dict(rng.choice(deltas)), finish=rng.choice([None] * 8 + ["length"]), usage=usage)
            )
        if rng.random() < 0.5:
            chunks.append(chunk(choices=False, usage=(5, ct)))
        fast, general = StreamTally(VLLM), StreamTally(VLLM)
        for i, c in enumerate(chunks):
            obj = orjson.loads(orjson.dumps(c))
            assert fast.feed(obj, 100.0 + i) == general.feed_general(obj, 100.0 + i)
        a, b = RequestRecord(workload="w", start_wall_s=0.0), RequestRecord(workload="w", start_wall_s=0.0)
        fast.fill(a, 99.0, 200.0)
        general.fill(b, 99.0, 200.0)
        assert a == b, chunks
        assert all(getattr(fast, k) == getattr(general, k) for k in StreamTally.__slots__), chunks
