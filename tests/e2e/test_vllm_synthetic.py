"""`synthetic` against the real vLLM CPU build: prompts of exact lengths as vLLM counts them.

The prompts are built with vLLM's own `/tokenize` (chat form, `--tokenizer server`) before the
load; vLLM's `prompt_tokens_total` and `generation_tokens_total` then grow by exactly the drawn
lengths. Uses the session's `vllm_target` (tests/e2e/conftest.py) and the helpers of
tests/e2e/test_vllm_real.py (one `swarm run`, counters scraped before and after).
"""

from __future__ import annotations

import pytest

from tests.e2e.test_vllm_real import assert_reconciled, swarm_run

IN, OUT = 256, 64


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_synthetic_fixed_lengths_are_exact_on_vllm(vllm_target, vllm_report, tmp_path):
    run = swarm_run(
        vllm_target,
        tmp_path / "fixed",
        "--workload",
        "synthetic",
        "-u",
        "4",
        "-t",
        "8s",
        locust=("--tokenizer", "server", "--input-tokens", str(IN), "--output-tokens", str(OUT)),
    )
    got = assert_reconciled(run, max_tokens=OUT)
    n = got["requests"]
    assert run.delta("prompt_tokens") == IN * n, (run.delta("prompt_tokens"), n)
    assert run.delta("generation_tokens") == OUT * n, (run.delta("generation_tokens"), n)
    assert (run.records.prompt_tokens == IN).all()
    # no prompt twice: only the 3-token chat header is common, less than one 16-token cache block
    assert run.delta("prefix_hits") == 0, run.delta("prefix_hits")
    vllm_report.add(
        f"synthetic {IN}/{OUT}: {n} requests, vLLM prompt_tokens_total +{run.delta('prompt_tokens'):.0f} "
        f"(= {IN} x {n}), generation_tokens_total +{run.delta('generation_tokens'):.0f} (= {OUT} x {n}), "
        f"prefix-cache hits {run.delta('prefix_hits'):.0f}"
    )


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_synthetic_range_lengths_lie_in_range_and_cover_it(vllm_target, vllm_report, tmp_path):
    lo, hi = 32, 480
    run = swarm_run(
        vllm_target,
        tmp_path / "range",
        "--workload",
        "synthetic",
        "-u",
        "4",
        "-t",
        "10s",
        locust=(
            "--tokenizer",
            "server",
            "--input-tokens",
            f"{lo}-{hi}",
            "--output-tokens",
            "8",
            "--seed",
            "7",
        ),
    )
    got = assert_reconciled(run, max_tokens=8)
    p = run.records.prompt_tokens
    assert p.between(lo, hi).all(), (p.min(), p.max())
    span = hi - lo
    # uniform draws: the smallest and largest of n >= 20 fall within a quarter of the ends
    # (either misses with probability 0.75**20 < 0.4%; --seed 7 makes the draws the same each run)
    assert got["requests"] >= 20, got
    assert p.min() <= lo + 0.25 * span and p.max() >= hi - 0.25 * span, (p.min(), p.max())
    assert p.nunique() > got["requests"] / 4
    vllm_report.add(
        f"synthetic {lo}-{hi}: {got['requests']} requests, usage prompt tokens {p.min()}-{p.max()} "
        f"({p.nunique()} distinct), all equal to vLLM's counter delta {run.delta('prompt_tokens'):.0f}"
    )
