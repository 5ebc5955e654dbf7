"""Tokenizers for exact prompt lengths: a local Hugging Face tokenizer (the shipped tiny model's)
with its chat template, `--tokenizer` choices, and `auto` falling back with one warning."""

from __future__ import annotations

import json
import logging

import pytest
from tokenizers import Tokenizer as HFTokenizer

from swarm.client.tokenize import LocalTokenizer, open_tokenizer
from swarm.core.errors import TargetError, UsageError
from swarm.core.tokenizer import PseudoTokenizer
from tests.helpers.support import REPO, free_port

TINY = REPO / "swarm" / "models" / "tiny-qwen2"


def test_local_chat_count_is_the_rendered_template_encoded():
    tok = LocalTokenizer(TINY)
    raw = HFTokenizer.from_file(str(TINY / "tokenizer.json"))
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
    text = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"
    assert tok.count_chat(msgs) == len(raw.encode(text, add_special_tokens=False).ids)
    # the kwargs reach the template: thinking off adds the empty think block of Qwen3 templates
    off = tok.count_chat(msgs, {"enable_thinking": False})
    assert (
        off
        == len(raw.encode(text + "<think>\n\n</think>\n\n", add_special_tokens=False).ids)
        > tok.count_chat(msgs)
    )


def test_local_tokenizer_file_without_template(tmp_path):
    (tmp_path / "tokenizer.json").write_bytes((TINY / "tokenizer.json").read_bytes())
    tok = open_tokenizer(str(tmp_path / "tokenizer.json"), base_url=None, model=None, dialect="auto")
    assert tok.count_prompt("hello") >= 1
    with pytest.raises(UsageError, match="no chat_template"):
        tok.count_chat([{"role": "user", "content": "hi"}])


def test_bad_tokenizer_paths_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match=r"no tokenizer\.json"):
        open_tokenizer(str(tmp_path), base_url=None, model=None, dialect="auto")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(UsageError, match="cannot load"):
        open_tokenizer(str(tmp_path / "tokenizer.json"), base_url=None, model=None, dialect="auto")


def test_auto_falls_back_to_pseudo_with_one_warning_and_server_refuses(caplog):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens
    with caplog.at_level(logging.WARNING):
        tok = open_tokenizer("auto", base_url=url, model="m", dialect="vllm")
    assert isinstance(tok, PseudoTokenizer)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "pseudo-tokenizer" in warnings[0].getMessage()
    with pytest.raises(TargetError, match="--tokenizer server"):
        open_tokenizer("server", base_url=url, model="m", dialect="vllm")
    with pytest.raises(TargetError, match="openai dialect has no tokenize endpoint"):
        open_tokenizer("server", base_url=url, model="m", dialect="openai")
