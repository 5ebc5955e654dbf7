"""Writes the tiny Qwen2 model as one GGUF file for llama.cpp's `llama-server`.

    python scripts/make_tiny_gguf.py OUT.gguf --gguf-py LLAMA_CPP_SRC/gguf-py

The same model as swarm/models/tiny-qwen2 (which vLLM serves with random weights): its
config.json (Qwen2, hidden 256, 2 layers, 4 heads, 2 KV heads, head_dim 64), its byte-level BPE
tokenizer (tokenizer.json: vocabulary, merges, added tokens) and its Qwen3-style ChatML chat
template (tokenizer_config.json: `enable_thinking` false appends an empty think block; the GGUF's
copy also opens a think block with thinking on, see GGUF_CHAT_TEMPLATE). GGUF has
no "dummy weights" switch, so the weights are drawn here: normal(0, initializer_range) from a
fixed seed (numpy's PCG64), RMS-norm weights 1, float32. About 6.5 MB.

The GGUF writer is llama.cpp's own gguf-py, from the source tree scripts/llama-server-build.sh
unpacked (the reader and the writer are of one version). Deterministic: the same inputs give a
byte-identical file (tests/e2e/test_llamacpp_real.py checks it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "swarm" / "models" / "tiny-qwen2"
SEED = 20261123
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4  # gguf.TokenType values


# The chat template written into the GGUF: the model's own (tokenizer_config.json: ChatML, an empty
# think block when `enable_thinking` is false) plus what llama.cpp's template analysis needs to
# parse reasoning (common/chat-diff-analyzer.cpp renders an assistant turn with reasoning_content
# and looks for its markers): a past assistant turn shows its reasoning_content in <think> tags, and
# with thinking on, the generation prompt opens a <think> block, as "forced-open" thinking templates
# do. The random model never writes </think>, so with thinking on llama-server sends everything as
# `reasoning_content`, and with thinking off as `content`, as a real reasoning model's server would.
GGUF_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['content'] is string %}{%- set content = message['content'] %}"
    "{%- elif message['content'] is not defined or message['content'] is none %}{%- set content = '' %}"
    "{%- else %}{%- set content = message['content'] | map(attribute='text') | join('') %}{%- endif %}"
    "{%- if message['role'] == 'assistant' and message['reasoning_content'] is defined"
    " and message['reasoning_content'] %}"
    "{%- set content = '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' + content %}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)


def tensors(config: dict, rng) -> list[tuple[str, object]]:
    """(GGUF name, numpy array in PyTorch's (out, in) layout) for every weight of the model."""
    import numpy as np

    hidden, ff, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q_dim = config["num_attention_heads"] * config["head_dim"]
    kv_dim = config["num_key_value_heads"] * config["head_dim"]
    std = config["initializer_range"]

    def w(*shape: int):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    out: list[tuple[str, object]] = [("token_embd.weight", w(vocab, hidden))]
    for i in range(config["num_hidden_layers"]):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", np.ones(hidden, dtype=np.float32)),
            (b + "attn_q.weight", w(q_dim, hidden)),
            (b + "attn_q.bias", w(q_dim)),
            (b + "attn_k.weight", w(kv_dim, hidden)),
            (b + "attn_k.bias", w(kv_dim)),
            (b + "attn_v.weight", w(kv_dim, hidden)),
            (b + "attn_v.bias", w(kv_dim)),
            (b + "attn_output.weight", w(hidden, q_dim)),
            (b + "ffn_norm.weight", np.ones(hidden, dtype=np.float32)),
            (b + "ffn_gate.weight", w(ff, hidden)),
            (b + "ffn_up.weight", w(ff, hidden)),
            (b + "ffn_down.weight", w(hidden, ff)),
        ]
    out += [("output_norm.weight", np.ones(hidden, dtype=np.float32)), ("output.weight", w(vocab, hidden))]
    return out


def vocabulary(tokenizer: dict, vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their GGUF types, and the merges as "a b" strings."""
    tokens: list[str | None] = [None] * vocab_size
    types = [TOKEN_NORMAL] * vocab_size
    for text, i in tokenizer["model"]["vocab"].items():
        tokens[i] = text
    for added in tokenizer["added_tokens"]:
        tokens[added["id"]] = added["content"]
        types[added["id"]] = TOKEN_CONTROL if added["special"] else TOKEN_USER_DEFINED
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        raise SystemExit(f"tokenizer.json has no token for ids {missing[:10]}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    return tokens, types, merges  # type: ignore[return-value]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gguf-py", type=Path, required=True, help="llama.cpp's gguf-py directory")
    args = ap.parse_args(argv)
    if not (args.gguf_py / "gguf" / "__init__.py").exists():
        print(f"make_tiny_gguf: no gguf package under {args.gguf_py}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.gguf_py))
    import gguf
    import numpy as np

    config = json.loads((MODEL / "config.json").read_text(encoding="utf-8"))
    tok_config = json.loads((MODEL / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))
    tokens, types, merges = vocabulary(tokenizer, config["vocab_size"])
    ids = {t: i for i, t in enumerate(tokens)}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "qwen2")
    w.add_name("tiny-qwen2")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_tokenizer_model("gpt2")  # byte-level BPE
    w.add_tokenizer_pre("gpt-2")  # the GPT-2 split regex, as tokenizer.json's ByteLevel(use_regex)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(config["bos_token_id"])
    w.add_eos_token_id(ids[tok_config["eos_token"]])
    w.add_pad_token_id(ids[tok_config["pad_token"]])
    w.add_add_bos_token(False)
    w.add_chat_template(GGUF_CHAT_TEMPLATE)
    rng = np.random.Generator(np.random.PCG64(SEED))
    for name, array in tensors(config, rng):
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(args.out)
    print(f"{args.out}: {args.out.stat().st_size} bytes, vocab {len(tokens)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
