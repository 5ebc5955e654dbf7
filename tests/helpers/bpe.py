"""A 1,000-token byte-level BPE trained in the test (HF `tokenizers`) on the shipped corpus's Chinese
documents and a little of its English: English words are several tokens each, so "common words of
one token" do not exist for it (issue 25, item 6). Saved with the tiny model's ChatML template."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.support import REPO

CORPUS = REPO / "swarm" / "load" / "prompts" / "rag_corpus.jsonl"
TINY = REPO / "swarm" / "models" / "tiny-qwen2"
VOCAB = 1000
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def train_small_bpe(out: Path, vocab: int = VOCAB) -> Path:
    """tokenizer.json + tokenizer_config.json (ChatML template) in `out`; returns `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    docs = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    zh = [" ".join(d["sentences"]) for d in docs if d.get("lang") == "zh"]
    en = " ".join(s for d in docs if d.get("lang") == "en" for s in d["sentences"])[:4000]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([*zh, en], trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = json.loads((TINY / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("added_tokens_decoder", None)
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


def tiny_model_with_small_bpe(out: Path) -> Path:
    """A copy of the shipped tiny model whose tokenizer is the 1,000-token BPE (vocab_size and the
    special token ids in config.json / generation_config.json set to the new tokenizer's)."""
    out.mkdir(parents=True, exist_ok=True)
    for f in TINY.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    train_small_bpe(out)
    ids = {t: i for i, t in enumerate(SPECIALS)}  # trained first: ids 0, 1, 2
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config.update(vocab_size=VOCAB, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"])
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    gen = json.loads((out / "generation_config.json").read_text(encoding="utf-8"))
    gen.update(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2), encoding="utf-8")
    return out
