"""Prompt construction cost: building 100k synthetic prompts, and the request path's share of it.

    .venv/bin/python benchmarks/prompts.py            # figures printed (~1 min)
    .venv/bin/python benchmarks/prompts.py --n 20000  # fewer prompts

1. Before the load (once per worker): `SyntheticWorkload.prepare` with the pseudo-tokenizer and
   with the shipped tiny model's real tokenizer loaded locally (`--tokenizer PATH`): the
   single-token word search, the template cost, the exact counts of a sample of lengths.
2. Building N prompts: N `next_request` calls (`--input-tokens 1024 --output-tokens 128`, and
   128-2048 uniform), each a complete, unique prompt text of its exact length; per prompt in
   microseconds, and a check that a sample of them counts exactly (outside the timing).
3. The request path: what a user does per request before the socket (draw the request, the
   dialect's JSON body), the shipped `short_qa` prompt set against `synthetic` 1024, per request
   in microseconds and as a ratio. Nothing is tokenized on this path.

The machine's load average is printed: figures taken while other work shares the cores are not
per-core figures.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from swarm.client.dialects import DIALECTS  # noqa: E402
from swarm.client.tokenize import LocalTokenizer  # noqa: E402
from swarm.core.tokenizer import PseudoTokenizer, Tokenizer  # noqa: E402
from swarm.load.workloads import Knobs, build  # noqa: E402

TINY = REPO / "swarm" / "models" / "tiny-qwen2"


def per_call_us(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def synthetic(tok: Tokenizer, dist: str) -> tuple[object, float]:
    w = build("synthetic", Knobs(input_tokens=dist, output_tokens="128", seed=1))
    t0 = time.perf_counter()
    w.prepare(tok, progress=lambda _: None)
    return w, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="prompts built per case (default 100000)")
    args = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rng = random.Random(0)
    vllm = DIALECTS["vllm"]
    for tok in (PseudoTokenizer(), LocalTokenizer(TINY)):
        for dist in ("1024", "128-2048"):
            w, prep_s = synthetic(tok, dist)
            t0 = time.perf_counter()
            reqs = [w.next_request(rng) for _ in range(args.n)]
            build_s = time.perf_counter() - t0
            sample = reqs[:: max(1, args.n // 50)]
            lo, hi = _range(dist)
            counted = all(lo <= tok.count_chat(r.messages) <= hi for r in sample)  # (fixed: lo == hi, exact)
            unique = len({r.messages[0]["content"] for r in reqs}) == len(reqs)
            print(
                f"synthetic {dist:>8} tokens, tokenizer {tok.name.split(':')[0]:6}: prepare {prep_s:6.2f} s; "
                f"{args.n:,} prompts in {build_s:5.2f} s = {build_s / args.n * 1e6:5.1f} us/prompt; "
                f"{len(sample)} counted in range: {counted}; all unique: {unique}"
            )
            del reqs
    shipped = build("short_qa")
    w, _ = synthetic(PseudoTokenizer(), "1024")

    def path(workload: object) -> Callable[[], object]:
        def one() -> object:
            r = workload.next_request(rng)  # type: ignore[attr-defined]
            return vllm.body(
                endpoint="chat",
                model="m",
                messages=r.messages,
                prompt=None,
                max_tokens=r.max_tokens,
                thinking=r.thinking,
                ignore_eos=r.ignore_eos,
            )

        return one

    n = min(args.n, 50_000)
    base = per_call_us(path(shipped), n)
    syn = per_call_us(path(w), n)
    print(
        f"request path (draw + JSON body), per request: short_qa {base:.1f} us, synthetic 1024 {syn:.1f} us "
        f"(x{syn / base:.1f}; the body of a 1024-token prompt is ~{len(path(w)()) / 1024:.0f} KiB)"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def _range(dist: str) -> tuple[int, int]:
    lo, _, hi = dist.partition("-")
    return int(lo), int(hi or lo)


if __name__ == "__main__":
    raise SystemExit(main())
