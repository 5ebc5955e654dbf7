"""swarm.client.dialects per server family: detection from /v1/models, request bodies, and each
family's stream read to the right numbers with no mismatch line. The shapes are those of the
families' sources as docs/server-families.md records them (SGLang `protocol.py` /
`serving_chat.py`, TGI `router/src/server.rs` / `chat.rs`, TensorRT-LLM `openai_protocol.py`,
Ollama `openai/openai.go` / `middleware/openai.go`)."""

from __future__ import annotations

import logging

import orjson
import pytest

from swarm.client.dialects import DIALECTS, detect_dialect, ignore_eos_dialects
from swarm.client.mismatch import reset_warnings
from swarm.client.tally import StreamTally
from swarm.core.options import DIALECT_NAMES
from tests.unit.client.test_dialects import chunk, run

MSGS = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("cards", "dialect"),
    [
        ([{"id": "qwen", "object": "model", "owned_by": "sglang", "max_model_len": 4096}], "sglang"),
        ([{"id": "qwen", "object": "model", "owned_by": "tensorrt_llm"}], "trtllm"),
        ([{"id": "Qwen/Qwen3-0.6B", "object": "model", "owned_by": "Qwen/Qwen3-0.6B"}], "tgi"),
        ([{"id": "qwen3:0.6b", "object": "model", "owned_by": "library"}], "ollama"),
        ([{"id": "qwen", "owned_by": "vllm"}], "vllm"),
        ([{"id": "qwen", "owned_by": "llamacpp"}], "llamacpp"),
        ([{"id": "gpt-4o", "owned_by": "openai"}], "openai"),
        ([{"id": "", "owned_by": ""}], "openai"),  # an empty owner is not TGI's model id
        ([], "openai"),
    ],
)
def test_detection_from_the_model_list(cards: list[dict], dialect: str) -> None:
    assert detect_dialect({"object": "list", "data": cards}) == dialect


def body(name: str, **kw) -> dict:
    args = {
        "endpoint": "chat",
        "model": "m",
        "messages": MSGS,
        "prompt": None,
        "max_tokens": 5,
        "thinking": False,
    }
    return orjson.loads(DIALECTS[name].body(**(args | kw)))


def test_request_bodies_per_family() -> None:
    running = {"include_usage": True, "continuous_usage_stats": True}
    for name in ("sglang", "trtllm"):  # running usage and the thinking switch, as vLLM
        b = body(name, ignore_eos=True, user="row-1")
        assert b["stream_options"] == running and b["chat_template_kwargs"] == {"enable_thinking": False}
        # TensorRT-LLM refuses undeclared fields: only those its ChatCompletionRequest declares
        assert set(b) <= {"model", "messages", "max_tokens", "stream", "stream_options",
                          "chat_template_kwargs", "ignore_eos", "user"}  # fmt: skip
    for name in ("tgi", "ollama"):  # usage only at the end, no template switch
        b = body(name)
        assert b["stream_options"] == {"include_usage": True} and "chat_template_kwargs" not in b
    assert ignore_eos_dialects() == "vllm, sglang, trtllm, llamacpp"


@pytest.fixture
def caplog_mismatch(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    reset_warnings()
    caplog.set_level(logging.WARNING, logger="swarm.client.mismatch")
    yield caplog
    reset_warnings()


def sglang_stream() -> list[dict]:
    """Role chunk without usage, content chunks with a running usage (reasoning in
    `reasoning_content`), a finish chunk without usage, then the usage chunk (`serving_chat.py`)."""
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Hm"}, usage=(7, 2)),  # two tokens in one chunk
        chunk({"content": "ok"}, usage=(7, 3)),
        chunk({"content": "!"}, usage=(7, 4)),
        chunk({}, finish="stop"),
        chunk(choices=False, usage=(7, 4)),
    ]


def tgi_stream() -> list[dict]:
    """Reasoning inside `content`, no running usage, the usage chunk with `"id": ""` (`chat.rs`)."""
    return [
        chunk({"role": "assistant", "content": "<think>"}),
        chunk({"role": "assistant", "content": "Hm"}),
        chunk({"role": "assistant", "content": "</think>"}),
        chunk({"role": "assistant", "content": "ok"}, finish="stop"),
        chunk(choices=False, usage=(7, 4), id=""),
    ]


def trtllm_stream() -> list[dict]:
    return [
        chunk({"role": "assistant", "content": ""}, usage=(7, 0)),
        chunk({"reasoning_content": "Hm"}, usage=(7, 2)),
        chunk({"content": "ok"}, usage=(7, 3)),
        chunk({"content": "!"}, usage=(7, 4), finish="stop"),
        chunk(choices=False, usage=(7, 4)),
    ]


def ollama_stream() -> list[dict]:
    """`delta.reasoning`, the finish in its own chunk with an empty delta, then the usage chunk."""
    return [
        chunk({"role": "assistant", "content": "", "reasoning": "Hm"}),
        chunk({"role": "assistant", "content": "", "reasoning": "m"}),
        chunk({"role": "assistant", "content": "ok"}),
        chunk({"role": "assistant", "content": "!"}),
        chunk({}, finish="stop"),
        chunk(choices=False, usage=(7, 4)),
    ]


@pytest.mark.parametrize(
    ("name", "stream", "reasoning", "ttfa"),
    [
        ("sglang", sglang_stream, 2, 0.03),
        ("tgi", tgi_stream, 3, 0.04),  # the <think> tags are tokens too
        ("trtllm", trtllm_stream, 2, 0.03),
        ("ollama", ollama_stream, 2, 0.03),
    ],
)
def test_each_family_stream_reads_right_and_silently(
    name: str, stream, reasoning: int, ttfa: float, caplog_mismatch: pytest.LogCaptureFixture
) -> None:
    _, r = run(stream(), DIALECTS[name])
    assert (r.output_tokens, r.prompt_tokens, r.reasoning_tokens) == (4, 7, reasoning)
    assert r.tokens_from_usage and r.finish_reason == "stop"
    assert r.ttfa_s == pytest.approx(ttfa)
    assert caplog_mismatch.records == []


def test_in_stream_errors_of_every_shape() -> None:
    for err, msg in [
        ({"error": "Request failed during generation: CUDA OOM", "error_type": "generation"},
         "Request failed during generation: CUDA OOM"),  # TGI
        ({"object": "error", "message": "context too long", "type": "BadRequestError", "code": 400},
         "context too long"),  # SGLang, TensorRT-LLM
        ({"error": {"message": "model not found", "type": "api_error"}}, "model not found"),  # Ollama
    ]:  # fmt: skip
        tally = StreamTally(DIALECTS["openai"])
        assert tally.feed(err, 1.0) is False and tally.error == msg


def test_the_option_lists_every_dialect() -> None:
    assert ("auto", *DIALECTS) == DIALECT_NAMES


def test_ollama_completions_zero_usage_on_every_chunk_counts_no_token_away() -> None:
    """Ollama's /v1/completions with include_usage writes `usage: {0, 0, 0}` on every chunk and the
    real usage in a `choices: []` chunk after them (`middleware/openai.go`, CompleteWriter): not a
    running usage. Read as one, no chunk would carry a token and TTFT would be absent."""
    zero = (0, 0)
    chunks = [
        chunk(text="a", usage=zero),
        chunk(text="b", usage=zero),
        chunk(text="", finish="length", usage=zero),
    ]
    chunks.append(chunk(choices=False, usage=(3, 2)))
    _, r = run(chunks, DIALECTS["ollama"], chat=False)
    assert (r.output_tokens, r.prompt_tokens, r.tokens_from_usage) == (2, 3, True)
    assert r.ttft_s == pytest.approx(0.01) and r.itl_s == pytest.approx([0.01])


def test_tgi_completions_usage_on_the_finishing_chunk(caplog_mismatch: pytest.LogCaptureFixture) -> None:
    """TGI's completions stream puts the usage on the last token's chunk, no `choices: []` chunk."""
    chunks = [chunk(text="a", id=""), chunk(text="b", finish="length", usage=(3, 2), id="")]
    _, r = run(chunks, DIALECTS["tgi"], chat=False)
    assert (r.output_tokens, r.prompt_tokens, r.tokens_from_usage) == (2, 3, True)
    assert caplog_mismatch.records == []
