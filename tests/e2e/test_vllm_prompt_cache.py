"""Cached prompt tokens against a real vLLM (the CPU build, `--enable-prompt-tokens-details`):
the responses' `usage.prompt_tokens_details.cached_tokens` summed equal the increase of
`vllm:prefix_cache_hits_total` exactly (both are each request's prefix-cache hit at its first
admission, in whole KV blocks), and the diagnosis says so."""

from __future__ import annotations

import json
import math

import pytest

from tests.e2e.test_vllm_real import MAX_TOKENS, swarm_run

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_cached_tokens_equal_vllms_prefix_cache_hits(vllm_target, vllm_report, tmp_path):
    out = tmp_path / "run"
    run = swarm_run(
        vllm_target,
        out,
        "--workload",
        "rag",
        "-u",
        "2",
        "-t",
        "12s",
        locust=("--max-tokens", str(MAX_TOKENS), "--rag-tokens", "600-900"),
    )
    df = run.records
    cached, hits = int(df.cached_tokens.fillna(0).sum()), run.delta("prefix_hits")
    block = math.gcd(*(int(c) for c in df.cached_tokens.fillna(0)))
    findings = [f["text"] for f in json.loads((out / "diagnosis.json").read_text())]
    vllm_report.add(
        f"rag 600-900 tokens, 2 users x 12 s: {len(df)} requests, prompt tokens {df.prompt_tokens.sum()}, "
        f"cached_tokens {cached} (per request {sorted(set(df.cached_tokens.astype(int)))[:8]}, gcd {block}) "
        f"vs vllm:prefix_cache_hits_total +{hits:.0f}, queries +{run.delta('prefix_queries'):.0f}; diagnosis: "
        f"{[t for t in findings if 'cached prompt tokens' in t.lower()]}"
    )
    assert len(df) >= 3 and (df.outcome == "ok").all(), df.outcome.value_counts()
    assert df.cached_tokens.notna().all(), df[["prompt_tokens", "cached_tokens"]].head()  # 0 included
    assert cached > 0 and cached == hits
    assert run.delta("prefix_queries") == df.prompt_tokens.sum()
    assert any(t.startswith("Cached prompt tokens reconcile exactly") for t in findings), findings
    assert run.summary["rag"]["prompt_cache"]["cached_tokens"] == cached
