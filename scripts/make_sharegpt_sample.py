#!/usr/bin/env python3
"""Write the shipped ShareGPT-format sample, swarm/load/prompts/sharegpt_sample.json, byte for byte.

Made here from the swarm's own shipped prompt sets (nothing copied from ShareGPT): each human turn
is a prompt of chat.jsonl / thinking.jsonl / translate.jsonl, or a RAG document plus its question;
each gpt turn an answer of 1-8 sentences of the shipped RAG corpus, so reference lengths vary
from a few to a few hundred tokens. A few entries exercise `vllm bench serve`'s filters: one
turn only, an answer under 4 tokens, a prompt over 1024 tokens. Deterministic (seed 0):
`python scripts/make_sharegpt_sample.py` rewrites the same bytes (tests/unit/load/test_dataset.py
checks it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

PROMPTS = Path(__file__).resolve().parent.parent / "swarm" / "load" / "prompts"
OUT = PROMPTS / "sharegpt_sample.json"


def _jsonl(name: str) -> list[dict]:
    return [
        json.loads(line) for line in (PROMPTS / name).read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def build() -> list[dict]:
    rng = random.Random(0)
    docs = _jsonl("rag_corpus.jsonl")
    sentences = [(d["lang"], s) for d in docs for s in d["sentences"]]
    prompts = [
        r["prompt"] for name in ("chat.jsonl", "thinking.jsonl", "translate.jsonl") for r in _jsonl(name)
    ]
    for d in rng.sample(docs, 10):
        sep = "" if d["lang"] == "zh" else " "
        prompts.append(d["title"] + "\n" + sep.join(d["sentences"][:4]) + "\n\n" + d["question"])

    def answer() -> str:
        lang, first = rng.choice(sentences)
        picked = [first, *[s for lg, s in rng.sample(sentences, 40) if lg == lang][: rng.randint(0, 7)]]
        return ("" if lang == "zh" else " ").join(picked)

    out = []
    for i, p in enumerate(prompts):
        turns = [{"from": "human", "value": p}, {"from": "gpt", "value": answer()}]
        if i % 7 == 3:  # some conversations go on; only the first two turns count
            turns += [{"from": "human", "value": rng.choice(prompts)}, {"from": "gpt", "value": answer()}]
        out.append({"id": f"swarm-{i:04d}", "conversations": turns})
    long_prompt = " ".join([s for lg, s in sentences if lg == "en"][:120])  # > 1024 tokens: filtered
    out += [
        {"id": "swarm-one-turn", "conversations": [{"from": "human", "value": prompts[0]}]},
        {"id": "swarm-short-answer", "conversations": [{"from": "human", "value": prompts[1]}, {"from": "gpt", "value": "OK"}]},
        {"id": "swarm-long-prompt", "conversations": [{"from": "human", "value": long_prompt}, {"from": "gpt", "value": answer()}]},
    ]  # fmt: skip
    return out


def render() -> str:
    return json.dumps(build(), ensure_ascii=False, indent=1) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"{OUT}: {len(build())} conversations", file=sys.stderr)
