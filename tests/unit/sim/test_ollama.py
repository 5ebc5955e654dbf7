"""swarm/sim/ollama.py: Ollama's OpenAI-compatible answers, held to ollama/ollama at fb307609
(`openai/openai.go`: Delta, ChunkChoice, FinishChunk, NewError, ToListCompletion;
`middleware/openai.go`: the finish chunk, the usage chunk, completions' zero usage)."""

from __future__ import annotations

import json

import pytest

from swarm.sim import ollama
from swarm.sim.render import Output, Tape


def _events(data: bytes) -> list[dict]:
    return [json.loads(e[6:]) for e in data.split(b"\n\n") if e]


def _stream(
    endpoint: str, include_usage: bool, reasoning: int = 0, utf8_split: float = 0.0
) -> tuple[list[dict], Tape]:
    tape = Tape.build(0, utf8_split, "reasoning")
    out = Output("chatcmpl-1", 7, 11, 6, reasoning, "stop", 5)
    r = ollama.OllamaStreamRenderer(tape, out, "qwen3:0.6b", endpoint, include_usage, "reasoning")
    parts: list[bytes] = [r.role_chunk()]
    r.tokens(0, 6, parts)
    parts.append(r.closing(6))
    return _events(b"".join(parts)), tape


def test_a_chat_stream_opens_with_the_role_and_finishes_in_its_own_chunk():
    chunks, tape = _stream("chat", include_usage=True, reasoning=2)
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas[0] == {"role": "assistant", "content": "", "reasoning": tape.text[5]}
    assert deltas[1] == {"content": "", "reasoning": tape.text[6]}
    assert deltas[2] == {"content": tape.text[7]}
    assert len(deltas) == 6 and deltas[-1] == {}  # five tokens with text (the EOS sends none), the finish
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 6,
        "total_tokens": 17,
    }
    assert all(c["system_fingerprint"] == "fp_ollama" and "usage" not in c for c in chunks[:-1])
    assert "usage" not in _stream("chat", include_usage=False)[0][-1]


def test_a_token_inside_a_utf8_character_is_held():
    chunks, tape = _stream("chat", include_usage=False, utf8_split=0.5)
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[:-1]]
    assert "" not in texts and len(texts) == sum(1 for k in range(5) if tape.text[5 + k])


def test_completions_chunks_carry_a_zero_usage_until_the_last():
    chunks, _ = _stream("completions", include_usage=True)
    assert all(
        c["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0} for c in chunks[:-1]
    )
    assert chunks[-2]["choices"][0] == {"text": "", "index": 0, "finish_reason": "stop"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6


def test_errors_and_listing_are_ollama_s():
    with pytest.raises(ollama.OllamaError) as e:
        ollama.parse(b'{"model": "other", "messages": [{"role": "user", "content": "hi"}]}', "chat", "m", 512)
    assert e.value.status == 404
    assert json.loads(e.value.body()) == {
        "error": {
            "message": 'model "other" not found, try pulling it first',
            "type": "not_found_error",
            "param": None,
            "code": None,
        }
    }
    with pytest.raises(ollama.OllamaError) as e:
        ollama.parse(b'{"model": "m", "messages": []}', "chat", "m", 512)
    assert e.value.status == 400 and json.loads(e.value.body())["error"]["type"] == "invalid_request_error"
    assert ollama.models_body("qwen3:0.6b", 5)["data"][0]["owned_by"] == "library"
    with pytest.raises(LookupError):
        ollama.NoMetrics().render()
