"""Writes the tiny Qwen2 model, or a llama-architecture model of a given size, as one GGUF file.

    python scripts/make_tiny_gguf.py OUT.gguf --gguf-py LLAMA_CPP_SRC/gguf-py
    python scripts/make_tiny_gguf.py OUT.gguf --gguf-py LLAMA_CPP_SRC/gguf-py --params 1.5B

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

`--params N` (e.g. 1.5B, 300M) writes a model that makes a GPU do real work instead (scripts/gpu-check.sh):
llama architecture, float16, the tiny model's tokenizer and chat template, one layer shape of a real
model (the widest of SHAPES that still gives at least MIN_LAYERS layers: 1.5B is Llama-3.2-1B's
2048-wide layer, 32 heads, 8 KV heads, FFN 8192, 25 of them) repeated to the size. Its weights are
windows of one block of BLOCK normal(0, initializer_range) draws from the same seed (row r of a
tensor starts `r x step` into the block, each tensor at its own offset): drawing 1.5 billion
normals would take about a minute, copying windows takes what the disk takes (3 GB in seconds).
The rows are shifted copies of one another, which changes nothing a server's speed depends on.
Each tensor is made only when it is written, so memory stays at one tensor.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "swarm" / "models" / "tiny-qwen2"
SEED = 20261123
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4  # gguf.TokenType values
# --params: (hidden, attention heads, KV heads, FFN) of real llama-architecture layers, narrowest first
SHAPES = (
    (256, 4, 2, 1024),
    (512, 8, 2, 2048),
    (1024, 16, 4, 4096),
    (2048, 32, 8, 8192),  # Llama-3.2-1B's layer
)
MIN_LAYERS = 8
MAX_PARAMS = 20e9  # a random model this size is 40 GB of disk: more is a typo
BLOCK = 1 << 23  # float16 draws every --params weight is a window of (16 MiB)
_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9}  # --params suffixes


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


@dataclass(frozen=True)
class LlamaShape:
    """A llama-architecture model's dimensions (--params)."""

    hidden: int
    heads: int
    kv_heads: int
    ff: int
    layers: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        kv_dim = self.kv_heads * self.head_dim
        return (
            2 * self.hidden * self.hidden
            + 2 * self.hidden * kv_dim
            + 3 * self.hidden * self.ff
            + 2 * self.hidden
        )

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + 2 * self.vocab * self.hidden + self.hidden


def parse_params(text: str) -> float:
    """'1.5B' -> 1.5e9, '300M' -> 3e8. ValueError on anything else."""
    t = text.strip().upper()
    unit = t[-1] if t and t[-1] in "KMBG" else ""
    number = float(t[: len(t) - len(unit)])  # ValueError on a bad number
    value = number * _UNITS[unit]
    if not math.isfinite(value) or value <= 0:
        raise ValueError(text)
    return value


def llama_shape(params: float, vocab: int) -> LlamaShape:
    """The widest of SHAPES with at least MIN_LAYERS layers for `params` (the narrowest below that)."""
    for hidden, heads, kv_heads, ff in reversed(SHAPES):
        one = LlamaShape(hidden, heads, kv_heads, ff, 1, vocab)
        layers = round((params - (one.params - one.layer_params)) / one.layer_params)
        if layers >= MIN_LAYERS or hidden == SHAPES[0][0]:
            return LlamaShape(hidden, heads, kv_heads, ff, max(layers, 1), vocab)
    raise AssertionError("SHAPES is empty")


def llama_tensors(shape: LlamaShape) -> list[tuple[str, tuple[int, ...]]]:
    """(GGUF name, PyTorch (out, in) shape) of every weight, in the order they are written."""
    h, kv_dim = shape.hidden, shape.kv_heads * shape.head_dim
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (shape.vocab, h))]
    for i in range(shape.layers):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (h,)),
            (b + "attn_q.weight", (h, h)),
            (b + "attn_k.weight", (kv_dim, h)),
            (b + "attn_v.weight", (kv_dim, h)),
            (b + "attn_output.weight", (h, h)),
            (b + "ffn_norm.weight", (h,)),
            (b + "ffn_gate.weight", (shape.ff, h)),
            (b + "ffn_up.weight", (shape.ff, h)),
            (b + "ffn_down.weight", (h, shape.ff)),
        ]
    return [*out, ("output_norm.weight", (h,)), ("output.weight", (shape.vocab, h))]


def window(block, dims: tuple[int, ...], index: int):
    """Tensor number `index`: float32 ones for a norm (1-D), else float16 windows of `block`, row r
    starting r x step after the tensor's own offset (a contiguous copy)."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    if len(dims) == 1:
        return np.ones(dims, dtype=np.float32)
    rows, cols = dims
    room = len(block) // 2
    offset = (index * 7919) % room  # 7919 (a prime): neighbouring tensors start far apart
    step = max(1, (room - cols) // rows)
    if step * (rows - 1) + cols > len(block) - offset:
        raise SystemExit(f"make_tiny_gguf: a {rows}x{cols} tensor does not fit the {len(block)}-draw block")
    view = as_strided(block[offset:], shape=(rows, cols), strides=(step * block.itemsize, block.itemsize))
    return np.ascontiguousarray(view)


def write_sized(out: Path, params: float, gguf, tokenizer_kv) -> LlamaShape:
    """The llama-architecture model of about `params` weights (float16), written tensor by tensor."""
    import numpy as np

    config = json.loads((MODEL / "config.json").read_text(encoding="utf-8"))
    shape = llama_shape(params, config["vocab_size"])
    tensors = llama_tensors(shape)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"random-llama-{shape.params / 1e9:.2f}b")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ff)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_vocab_size(shape.vocab)
    tokenizer_kv(w)
    for name, dims in tensors:
        dtype = np.float32 if len(dims) == 1 else np.float16
        w.add_tensor_info(name, dims, np.dtype(dtype), math.prod(dims) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.Generator(np.random.PCG64(SEED))
    block = rng.normal(0.0, config["initializer_range"], size=BLOCK).astype(np.float16)
    for index, (_, dims) in enumerate(tensors):
        w.write_tensor_data(window(block, dims, index))
    w.close()
    return shape


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
    ap.add_argument(
        "--params",
        metavar="N",
        help="a llama-architecture model of about N weights (e.g. 1.5B, 300M), float16, instead of the tiny one",
    )
    args = ap.parse_args(argv)
    if not (args.gguf_py / "gguf" / "__init__.py").exists():
        print(f"make_tiny_gguf: no gguf package under {args.gguf_py}", file=sys.stderr)
        return 2
    params = None
    if args.params is not None:
        try:
            params = parse_params(args.params)
        except ValueError:
            print(
                f"make_tiny_gguf: --params {args.params!r}: expected a size such as 1.5B or 300M",
                file=sys.stderr,
            )
            return 2
        if params > MAX_PARAMS:
            print(f"make_tiny_gguf: --params {args.params}: at most {MAX_PARAMS / 1e9:.0f}B", file=sys.stderr)
            return 2
    sys.path.insert(0, str(args.gguf_py))
    import gguf
    import numpy as np

    config = json.loads((MODEL / "config.json").read_text(encoding="utf-8"))
    tok_config = json.loads((MODEL / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))
    tokens, types, merges = vocabulary(tokenizer, config["vocab_size"])
    ids = {t: i for i, t in enumerate(tokens)}

    def tokenizer_kv(w) -> None:
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

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    if params is not None:
        shape = write_sized(tmp, params, gguf, tokenizer_kv)
        tmp.replace(args.out)
        print(
            f"{args.out}: {args.out.stat().st_size} bytes, llama {shape.params / 1e9:.2f}B parameters float16: "
            f"{shape.layers} layers of {shape.hidden} ({shape.heads} heads, {shape.kv_heads} KV heads, "
            f"FFN {shape.ff}), vocab {shape.vocab}"
        )
        return 0
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
    tokenizer_kv(w)
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
