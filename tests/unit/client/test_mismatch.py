"""swarm.client.mismatch: a dialect that misreads the stream says so in one line, once per process;
the right dialect says nothing."""

from __future__ import annotations

import logging

import pytest

from swarm.client.dialects import DIALECTS
from swarm.client.mismatch import logged_lines, mismatch_line, reset_warnings, unread_reasoning
from tests.unit.client.test_dialects import chunk, run
from tests.unit.client.test_dialects_families import ollama_stream, tgi_stream


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture):
    reset_warnings()
    caplog.set_level(logging.WARNING, logger="swarm.client.mismatch")
    yield lambda: [r.getMessage() for r in caplog.records if r.name == "swarm.client.mismatch"]
    reset_warnings()


def test_reasoning_in_a_field_the_dialect_does_not_read(lines) -> None:
    """Ollama's `delta.reasoning` read as llama.cpp: the reasoning chunks count as nothing, and
    the run says so once, with the dialects that read the field."""
    for _ in range(3):
        _, r = run(ollama_stream(), DIALECTS["llamacpp"])
    assert r.reasoning_tokens == 0  # what the wrong dialect gets: hence the line
    [line] = lines()
    assert line.startswith("the llamacpp dialect does not read delta.reasoning")
    assert "--dialect vllm|trtllm|ollama|openai" in line
    _, r = run(ollama_stream(), DIALECTS["ollama"])
    assert r.reasoning_tokens == 2 and len(lines()) == 1


def test_expected_running_usage_absent(lines) -> None:
    """TGI's stream (no running usage) read with the vllm dialect: one line naming the remedy."""
    run(tgi_stream(), DIALECTS["vllm"])
    run(tgi_stream(), DIALECTS["vllm"])
    [line] = lines()
    assert line.startswith("the vllm dialect asks for a running usage on every chunk")
    assert "--dialect llamacpp|tgi|ollama|openai" in line


def test_a_finished_stream_without_any_usage(lines) -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "a"}),
        chunk({"content": "b"}, finish="stop"),
    ]
    _, r = run(chunks, DIALECTS["openai"])
    assert r.output_tokens == 2 and not r.tokens_from_usage
    [line] = lines()
    assert line.startswith("the openai dialect asks for a usage chunk") and "--dialect vllm|" in line
    run(chunks[:2], DIALECTS["ollama"])  # cut before its finish: a failure of its own, not a mismatch
    assert len(lines()) == 1


def test_unread_reasoning_ignores_empty_and_read_fields() -> None:
    assert unread_reasoning({"reasoning": "x"}, ("reasoning_content",)) == "reasoning"
    assert unread_reasoning({"reasoning": ""}, ()) is None
    assert unread_reasoning({"reasoning_content": "x"}, ("reasoning_content",)) is None
    assert unread_reasoning({"tool_calls": []}, ()) is None
    with pytest.raises(ValueError, match="unknown mismatch kind"):
        mismatch_line(DIALECTS["vllm"], "other")


def test_the_lines_of_several_worker_logs_are_said_once() -> None:
    line = mismatch_line(DIALECTS["vllm"], "no_running_usage")
    worker = f"[2026-11-27 19:00:00,001] host/INFO/root: started\n[2026-11-27 19:00:01,002] host/WARNING/swarm.client.mismatch: {line}\n"
    other = mismatch_line(DIALECTS["llamacpp"], "unread", "reasoning")
    assert logged_lines([worker, worker, f"x/WARNING/swarm.client.mismatch: {other}\n", "no line"]) == [
        line,
        other,
    ]
    assert logged_lines(["[t] host/INFO/root: nothing"]) == []
