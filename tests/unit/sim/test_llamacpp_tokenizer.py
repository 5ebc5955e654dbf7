"""swarm/sim/llamacpp_tokenizer.py: /tokenize, /detokenize and /apply-template as llama-server answers."""

from __future__ import annotations

import pytest

from swarm.core.tokens import chat_prompt_tokens
from swarm.sim.llamacpp import LlamaError
from swarm.sim.llamacpp_tokenizer import apply_template, detokenize_answer, template_pieces, tokenize_answer

CHAT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


def test_an_applied_template_tokenizes_to_what_the_chat_request_counts():
    text = apply_template(CHAT)
    assert text == "".join(chat_prompt_tokens(CHAT))
    assert len(tokenize_answer({"content": text})["tokens"]) == len(chat_prompt_tokens(CHAT))
    assert template_pieces("<|im_start|>user\nhi<|im_end|>")[:3] == ["<|im_start|>", "user", "\n"]
    assert len(template_pieces(text, parse_special=False)) > len(template_pieces(text))


def test_tokenize_with_pieces_and_back():
    ids = tokenize_answer({"content": "hello world"})["tokens"]
    pieces = tokenize_answer({"content": "hello world", "with_pieces": True})["tokens"]
    assert [p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == "hello world"
    assert detokenize_answer({"tokens": ids}) == {"content": "hello world"}


def test_bad_bodies_are_llama_errors():
    with pytest.raises(LlamaError) as e:
        tokenize_answer({"content": 3})
    assert e.value.status == 400 and b'"content\\" must be provided' in e.value.body()
    with pytest.raises(LlamaError) as e:
        detokenize_answer({"tokens": "x"})
    assert e.value.status == 400 and b"invalid_request_error" in e.value.body()
