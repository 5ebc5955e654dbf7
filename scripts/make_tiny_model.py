"""Builds swarm/models/tiny-qwen2/: a Qwen2-architecture model directory without weights.

    python scripts/make_tiny_model.py [OUT_DIR]     # needs `tokenizers` (vLLM's venv has it)

What vLLM needs to serve it with `--load-format dummy` (random weights: a real engine, real
scheduler and real metrics, random text):

- config.json: `Qwen2ForCausalLM`, hidden 256, 2 layers, 4 heads, 2 KV heads, head_dim 64 (the
  CPU attention kernel rejects head_dim 16), vocab_size = the tokenizer's size exactly (a
  random model samples every id it has; an id without a token would decode to nothing).
- tokenizer.json: a byte-level BPE trained here with `tokenizers` on the swarm's own prompt
  sets (swarm/load/prompts/*.jsonl: Chinese and English), a few hundred merges. Byte-level means
  every UTF-8 byte has a token, so any text (Chinese included) tokenizes; the merges trained
  on Chinese text make common CJK characters one or two tokens instead of three.
  Added tokens as in Qwen3: <|endoftext|>, <|im_start|>, <|im_end|> (special), <think> and
  </think> (not special: `--reasoning-parser qwen3` looks them up in the vocabulary).
- tokenizer_config.json with a ChatML chat template that honours `enable_thinking` the way
  Qwen3's does: thinking off appends an empty `<think>\\n\\n</think>\\n\\n` to the generation
  prompt; thinking on (the default) appends nothing and the model "thinks" from its first token.
- generation_config.json: greedy decoding (temperature 0). Dummy weights are all drawn from
  the same seed, so the model is a fixed map from the current token to the next: greedy makes
  every answer the same token chain — reproducible, and checked (tests/e2e/test_vllm_real.py) never
  to emit </think>, <think> or an end-of-turn token within the tests' lengths. With sampling,
  a near-uniform random model would close </think> in about one token in vocab_size.

Deterministic: the same inputs give byte-identical files (the BPE trainer breaks ties by
byte order; JSON is written with sorted keys where the format allows).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "swarm" / "models" / "tiny-qwen2"
PROMPTS = REPO / "swarm" / "load" / "prompts"

MERGES = 500  # learned merges on top of the 256 byte tokens
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['content'] is string %}{%- set content = message['content'] %}"
    "{%- else %}{%- set content = message['content'] | map(attribute='text') | join('') %}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def corpus() -> list[str]:
    """Every text of the shipped prompt sets, in a fixed order."""
    texts: list[str] = []
    for path in sorted(PROMPTS.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            for key in ("prompt", "title", "question", "text", "source", "target"):
                if isinstance(row.get(key), str):
                    texts.append(row[key])
            texts.extend(s for s in row.get("sentences", []) if isinstance(s, str))
    preamble = json.loads((PROMPTS / "rag_preamble.json").read_text(encoding="utf-8"))
    texts.append(preamble["instructions"])
    texts.extend(preamble["pinned"])
    return texts


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + MERGES,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=alphabet,
        special_tokens=[],
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens(SPECIAL)
    tok.add_tokens(THINK)
    return tok


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    ids = {t: tok.token_to_id(t) for t in SPECIAL + THINK}
    tok.save(str(out / "tokenizer.json"), pretty=False)

    added = {
        str(ids[t]): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t in SPECIAL,
        }
        for t in SPECIAL + THINK
    }
    tokenizer_config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 256,
        "initializer_range": 0.02,
        "intermediate_size": 512,
        "max_position_embeddings": 4096,
        "max_window_layers": 2,
        "model_type": "qwen2",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }
    generation_config = {
        "bos_token_id": ids["<|endoftext|>"],
        "do_sample": False,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "temperature": 0.0,
    }
    for name, obj in (
        ("tokenizer_config.json", tokenizer_config),
        ("config.json", config),
        ("generation_config.json", generation_config),
    ):
        (out / name).write_text(
            json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    print(f"{out}: vocab {vocab_size} ({MERGES} merges), special ids {ids}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
