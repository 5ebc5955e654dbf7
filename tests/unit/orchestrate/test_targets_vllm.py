"""`swarm target vllm-cpu` without starting it: the shipped tiny model directory and the command
line (swarm/orchestrate/targets.py). Against the real vLLM: tests/e2e/test_vllm_real.py."""

from __future__ import annotations

import json

from tests.helpers.support import REPO

MODEL_DIR = REPO / "swarm" / "models" / "tiny-qwen2"


def test_tiny_model_directory():
    """config.json, tokenizer and chat template as vLLM and the qwen3 reasoning parser need them."""
    import jinja2

    config = json.loads((MODEL_DIR / "config.json").read_text())
    tok = json.loads((MODEL_DIR / "tokenizer.json").read_text())
    tok_config = json.loads((MODEL_DIR / "tokenizer_config.json").read_text())
    gen = json.loads((MODEL_DIR / "generation_config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and config["head_dim"] == 64
    assert config["hidden_size"] == config["num_attention_heads"] * config["head_dim"]
    added = {t["content"]: t for t in tok["added_tokens"]}
    assert config["vocab_size"] == len(tok["model"]["vocab"]) + len(
        added
    )  # every id the model can emit decodes
    assert {"<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"} <= set(added)
    assert not added["<think>"]["special"] and not added["</think>"]["special"]
    assert 200 <= len(tok["model"]["merges"]) <= 1000
    vocab = tok["model"]["vocab"]
    # byte-level: all 256 bytes are tokens (any UTF-8 text, Chinese included) and CJK merges were learned
    assert len([t for t in vocab if len(t) == 1]) >= 256
    assert any(
        len(bytes(_byte_decoder()[c] for c in t).decode("utf-8", "ignore")) == 1
        and "\u4e00" <= bytes(_byte_decoder()[c] for c in t).decode("utf-8", "ignore") <= "\u9fff"
        for t in vocab
        if len(t) == 3
    )
    eos = config["eos_token_id"]
    assert added["<|im_end|>"]["id"] == eos and gen["eos_token_id"][0] == eos
    assert gen["temperature"] == 0.0
    template = jinja2.Environment().from_string(tok_config["chat_template"])
    msgs = [{"role": "user", "content": "你好"}]
    on = template.render(messages=msgs, add_generation_prompt=True, enable_thinking=True)
    default = template.render(messages=msgs, add_generation_prompt=True)
    off = template.render(messages=msgs, add_generation_prompt=True, enable_thinking=False)
    assert on == default == "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n"
    assert off == on + "<think>\n\n</think>\n\n"


def test_vllm_command_binds_loopback_only():
    from swarm.orchestrate.targets import MODEL_DIR as SHIPPED
    from swarm.orchestrate.targets import server_command, server_env

    cmd = server_command("python", 8123)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd.count("--host") == 1
    assert cmd[cmd.index("--model") + 1] == str(SHIPPED) and SHIPPED == MODEL_DIR
    for flag in ("--load-format", "--enable-prefix-caching", "--reasoning-parser", "--served-model-name"):
        assert flag in cmd
    env = server_env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] and env["VLLM_HOST_IP"] == "127.0.0.1"


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: token character -> byte."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}
