#!/usr/bin/env python3
"""Write the shipped sample traces, swarm/load/traces/*, byte for byte (seed 0).

One small trace per `--trace-format` (swarm/load/trace.py), in the published layouts
(REFERENCE.md §9), made up here (nothing copied from the real traces):

- mooncake_sample.jsonl: 600 rows, Poisson arrivals at 50 req/s (about 12 s), `timestamp` in ms.
  Prompts are a system prompt (one of 6, 1-2 blocks of 512 tokens) plus a question, a turn of one
  of 40 conversations (its context grows by one block a turn, so turn k shares k blocks with the
  turns before it), or a prompt of its own; the last, partial block of every row is its own.
- azure_sample.csv: 200 rows of `TIMESTAMP,ContextTokens,GeneratedTokens` at about 20 req/s.
- burstgpt_sample.csv: 200 rows of BurstGPT's six columns at about 20 req/s.
- jsonl_sample.jsonl: 100 rows of the swarm's own record fields (`start_wall_s`, `prompt_tokens`,
  `output_tokens`).

`python scripts/make_sample_traces.py` rewrites the same bytes (tests/unit/load/test_trace.py checks it).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "swarm" / "load" / "traces"
BLOCK = 512


def _arrivals(rng: random.Random, n: int, rate: float) -> list[float]:
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def mooncake() -> str:
    rng = random.Random(0)
    next_id = 0

    def new_ids(k: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + k))
        next_id += k
        return ids

    systems = [new_ids(rng.randint(1, 2)) for _ in range(6)]
    sessions = [new_ids(5) for _ in range(40)]
    turns = [0] * len(sessions)
    lines = []
    for t in _arrivals(rng, 600, 50.0):
        kind = rng.random()
        if kind < 0.5:
            shared = rng.choice(systems)
        elif kind < 0.9:
            s = rng.randrange(len(sessions))
            turns[s] = min(turns[s] + 1, len(sessions[s]))
            shared = sessions[s][: turns[s]]
        else:
            shared = []
        tail = rng.randint(40, 400)
        n_in = len(shared) * BLOCK + tail
        hash_ids = shared + new_ids(math.ceil(n_in / BLOCK) - len(shared))
        row = {
            "timestamp": round(t * 1000),
            "input_length": n_in,
            "output_length": rng.randint(4, 48),
            "hash_ids": hash_ids,
        }
        lines.append(json.dumps(row, separators=(", ", ": ")))
    return "\n".join(lines) + "\n"


def azure() -> str:
    rng = random.Random(1)
    t0 = datetime(2023, 11, 16, 18, 15, 46, tzinfo=UTC)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    for t in _arrivals(rng, 200, 20.0):
        ts = t0 + timedelta(seconds=t)
        frac = f"{ts.microsecond:06d}{rng.randrange(10)}"  # 7 fraction digits, as in the Azure files
        w.writerow([ts.strftime("%Y-%m-%d %H:%M:%S") + "." + frac, rng.randint(40, 2000), rng.randint(4, 64)])
    return buf.getvalue()


def burstgpt() -> str:
    rng = random.Random(2)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"])
    for t in _arrivals(rng, 200, 20.0):
        n_in, n_out = rng.randint(20, 1500), rng.randint(4, 64)
        model = rng.choice(["ChatGPT", "GPT-4"])
        log_type = rng.choice(["Conversation log", "API log"])
        w.writerow([round(1000 + t, 3), model, n_in, n_out, n_in + n_out, log_type])
    return buf.getvalue()


def jsonl() -> str:
    rng = random.Random(3)
    lines = []
    for t in _arrivals(rng, 100, 20.0):
        row = {
            "start_wall_s": round(1_763_900_000 + t, 6),
            "prompt_tokens": rng.randint(30, 1200),
            "output_tokens": rng.randint(4, 64),
        }
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


SAMPLES = {
    "mooncake_sample.jsonl": mooncake,
    "azure_sample.csv": azure,
    "burstgpt_sample.csv": burstgpt,
    "jsonl_sample.jsonl": jsonl,
}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in SAMPLES.items():
        (OUT / name).write_text(make(), encoding="utf-8")
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
