"""Server-side metrics: parsing real-format scrapes (vLLM new/old names, llama.cpp), histogram
quantiles as Prometheus computes them, per-stage aggregation (the poller: tests/unit/orchestrate/test_pollers.py)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from swarm.analysis.server_metrics import (
    Histogram,
    ServerSnapshot,
    histogram_quantile,
    read_snapshots,
    stage_stats,
    window_stats,
)
from swarm.analysis.server_parse import parse_metrics
from tests.helpers.support import DATA

INF = math.inf


def fixture(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------------------------------- parsing


def test_vllm_033_scrape_normalised():
    s = parse_metrics(fixture("vllm_0_33_metrics.txt"), ts=10.0)
    assert (s.source, s.model, s.ts) == ("vllm", "qwen3.6-27b", 10.0)
    assert (s.running, s.waiting, s.kv_usage) == (195, 3, 0.8125)
    assert (s.prompt_tokens, s.generation_tokens, s.preemptions) == (1_234_567, 456_789, 12)
    assert (s.prefix_queries, s.prefix_hits) == (1_234_567, 617_280)
    assert (s.spec_drafts, s.spec_draft_tokens, s.spec_accepted) == (100_000, 300_000, 210_000)
    assert s.request_success["stop"] == 4210 and s.request_success["length"] == 770
    assert set(s.histograms) == {"ttft", "itl", "e2e", "queue", "prefill", "decode"}
    ttft = s.histograms["ttft"]
    assert ttft.count == 5000 and ttft.bounds[0] == 0.001 and ttft.bounds[-1] == INF
    assert len(ttft.bounds) == 23  # vLLM's 22 TTFT buckets + +Inf
    assert 0.1 < ttft.quantile(0.5) < 0.5 and ttft.quantile(0.99) > ttft.quantile(0.5)
    # `vllm:iteration_tokens_total` is a histogram whose name ends in _total: not a counter
    assert s.histograms["itl"].count == 300_000


def test_vllm_010_scrape_with_old_and_new_names_counts_each_once():
    new, old = (
        parse_metrics(fixture("vllm_0_33_metrics.txt")),
        parse_metrics(fixture("vllm_0_10_metrics.txt")),
    )
    for name in (
        "running",
        "waiting",
        "kv_usage",
        "prompt_tokens",
        "generation_tokens",
        "preemptions",
        "prefix_queries",
        "prefix_hits",
    ):
        assert getattr(old, name) == getattr(new, name), name
    assert old.spec_drafts is None  # not configured: absent, not zero
    assert old.histograms["itl"].count == 300_000  # not 2x: the deprecated alias is not added on top


def test_vllm_old_names_only():
    """Pre-0.12 names alone (new ones stripped): KV, prefix cache and ITL still found."""
    drop = re.compile(
        r"^(# (HELP|TYPE) )?vllm:(kv_cache_usage_perc|prefix_cache_(queries|hits)|inter_token_latency_seconds)"
    )
    text = "\n".join(line for line in fixture("vllm_0_10_metrics.txt").splitlines() if not drop.match(line))
    assert "\nvllm:kv_cache_usage_perc{" not in text and "\nvllm:gpu_cache_usage_perc{" in text
    s = parse_metrics(text)
    assert s.kv_usage == 0.8125
    assert (s.prefix_queries, s.prefix_hits) == (1_234_567, 617_280)
    assert s.histograms["itl"].count == 300_000  # from vllm:time_per_output_token_seconds


def test_llamacpp_scrape():
    s = parse_metrics(fixture("llamacpp_metrics.txt"))
    assert s.source == "llamacpp"
    assert (s.running, s.waiting) == (2, 1)
    assert (s.prompt_tokens, s.generation_tokens) == (33065, 7801)
    assert s.kv_usage is None and s.preemptions is None and s.histograms == {} and s.request_success == {}
    assert s.prefix_hits is None  # an older llama.cpp: no cached-prompt counter


def test_real_llamacpp_b11434_scrape():
    """A real scrape: llama-server b11434 (scripts/llama-server-build.sh) after the same chat request
    twice (36 prompt tokens each, the second with 35 from the prompt cache, 16 output tokens each)."""
    s = parse_metrics(fixture("llamacpp_b11434_metrics.txt"))
    assert s.source == "llamacpp" and (s.running, s.waiting) == (0, 0)
    assert (s.prompt_tokens, s.prefix_hits, s.generation_tokens) == (2 * 36, 35, 2 * 16)
    assert (s.spec_drafts, s.spec_draft_tokens, s.spec_accepted) == (0, 0, 0)
    assert s.kv_usage is None and s.histograms == {}


def test_llamacpp_cached_prompt_tokens_count_as_prompt_tokens():
    """llama.cpp's prompt_tokens_total leaves out the prompt-cache hits; the normalised total has them."""
    text = fixture("llamacpp_metrics.txt") + (
        "# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache\n"
        "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
        "llamacpp:prompt_tokens_cached_total 935\n"
    )
    s = parse_metrics(text)
    assert (s.prompt_tokens, s.prefix_hits, s.prefix_queries) == (33065 + 935, 935, 33065 + 935)


TWO_MODELS = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 4.0
vllm:num_requests_running{engine="1",model_name="a"} 6.0
vllm:num_requests_running{engine="0",model_name="b"} 100.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.4
vllm:kv_cache_usage_perc{engine="0",model_name="b"} 0.9
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="a"} 10.0
vllm:generation_tokens_total{engine="1",model_name="a"} 5.0
vllm:generation_tokens_total{engine="0",model_name="b"} 1000.0
"""


def test_filter_by_model_and_sum_engines():
    a = parse_metrics(TWO_MODELS, model="a")
    assert a.model == "a" and a.running == 10 and a.generation_tokens == 15
    assert a.kv_usage == pytest.approx(0.3)  # a fraction per engine: averaged
    b = parse_metrics(TWO_MODELS, model="b")
    assert (b.running, b.kv_usage) == (100, 0.9)
    both = parse_metrics(TWO_MODELS, model="not-served")  # unknown name: everything, said by model=None
    assert both.model is None and both.running == 110


def test_not_prometheus_text_raises_value_error():
    with pytest.raises(ValueError):
        parse_metrics("<html>not metrics {{{</html>\n")


# ---------------------------------------------------------------------------------------- quantiles


def test_histogram_quantile_matches_prometheus_rules():
    bounds, counts = (0.1, 0.2, INF), (10, 20, 20)
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.1)
    assert histogram_quantile(0.75, bounds, counts) == pytest.approx(0.15)
    assert histogram_quantile(0.25, bounds, counts) == pytest.approx(0.05)  # first bucket from 0
    # rank in the +Inf bucket -> highest finite bound
    assert histogram_quantile(0.99, (0.1, 0.2, INF), (10, 20, 40)) == 0.2
    assert histogram_quantile(0.5, bounds, (0, 0, 0)) is None  # NaN in Prometheus
    assert histogram_quantile(0.5, (0.1, 0.2), (1, 2)) is None  # no +Inf bucket
    assert histogram_quantile(0.5, (INF,), (5,)) is None
    assert histogram_quantile(-0.1, bounds, counts) == -INF and histogram_quantile(1.1, bounds, counts) == INF
    # non-monotonic counts (scrape race) are forced monotonic as Prometheus does
    assert histogram_quantile(0.5, (0.1, 0.2, 0.3, INF), (10, 9, 20, 20)) == pytest.approx(0.1)


def test_histogram_quantile_close_to_exact_on_fine_buckets():
    rng = np.random.default_rng(1)
    x = rng.lognormal(-1.5, 0.5, 20_000)
    bounds = (*np.linspace(0.01, 2.0, 400).tolist(), INF)
    counts = [float((x <= b).sum()) for b in bounds]
    for q in (0.5, 0.9, 0.99):
        assert histogram_quantile(q, bounds, counts) == pytest.approx(np.quantile(x, q), rel=0.01)


def test_histogram_delta_and_reset():
    old = Histogram((0.1, INF), (5, 8), 1.0, 8)
    new = Histogram((0.1, INF), (15, 20), 3.0, 20)
    d = new.delta(old)
    assert d.counts == (10, 12) and d.count == 12 and d.sum == pytest.approx(2.0)
    assert d.mean == pytest.approx(2.0 / 12)
    assert old.delta(new) == old  # counter reset: the newer one alone


# ---------------------------------------------------------------------------------------- per stage


def snap(ts, running, waiting, kv, gen, pre=0.0, ttft_counts=(0, 0, 0), stop=0.0, drafts=None, acc=None):
    s = ServerSnapshot(
        ts=ts,
        source="vllm",
        running=running,
        waiting=waiting,
        kv_usage=kv,
        prompt_tokens=gen * 2,
        generation_tokens=gen,
        preemptions=pre,
        prefix_queries=gen * 2,
        prefix_hits=gen,
        request_success={"stop": stop},
    )
    if drafts is not None:
        s.spec_drafts, s.spec_draft_tokens, s.spec_accepted = drafts, drafts * 3, acc
    s.histograms["ttft"] = Histogram(
        (0.1, 0.5, INF), tuple(float(c) for c in ttft_counts), 0.0, float(ttft_counts[-1])
    )
    return s


def test_stage_stats_two_stages():
    series = [
        snap(100 + t, 64, 0, 0.25, 100.0 * t, ttft_counts=(10 * t, 10 * t, 10 * t), stop=10 * t)
        for t in range(11)
    ]  # stage 0: t 0-10, TTFT all < 0.1 s
    series += [
        snap(
            110 + t,
            64,
            20,
            0.26,
            1000 + 100.0 * t,
            pre=0.0,
            ttft_counts=(100, 100 + 10 * t, 100 + 10 * t),
            stop=100 + 10 * t,
        )
        for t in range(1, 11)
    ]  # stage 1: t 10-20, TTFT all 0.1-0.5 s
    stats = stage_stats(reversed(series), [(0, 100, 110), (1, 110, 120)])
    s0, s1 = stats[0], stats[1]
    assert s0.samples == 10 and s0.duration_s == 10  # [start, end): the boundary scrape is the next stage's
    assert s0.generation_tok_s == pytest.approx(100) and s0.prompt_tok_s == pytest.approx(200)
    assert s0.prefix_hit_rate == pytest.approx(0.5)
    assert s0.requests == 100 and s0.finish_reasons == {"stop": 100}
    assert s0.latency["ttft"]["count"] == 100 and s0.latency["ttft"]["p99"] <= 0.1
    assert (s1.running_mean, s1.running_max, s1.running_pinned) == (64, 64, 1.0)
    assert s1.waiting_mean == pytest.approx(20 * 9 / 10) and s1.kv_max == 0.26  # the scrape at 110 had none
    assert s1.waiting_median == 20  # the queue most scrapes saw: the one empty scrape moves only the mean
    assert s1.latency["ttft"]["count"] == 100
    assert 0.1 < s1.latency["ttft"]["p50"] <= 0.5  # only this stage's observations
    assert s1.preemptions == 0


def test_spec_decode_and_missing_counters():
    series = [snap(0, 1, 0, 0.1, 0, drafts=0.0, acc=0.0), snap(10, 1, 0, 0.1, 100, drafts=100.0, acc=210.0)]
    s = window_stats(series, 0, 0, 10)
    assert s.spec_acceptance_rate == pytest.approx(0.7)  # 210 / 300 draft tokens
    assert s.spec_mean_acceptance_length == pytest.approx(3.1)  # 1 + 210 / 100 drafts
    llama = [
        ServerSnapshot(ts=0, source="llamacpp", running=1, generation_tokens=0),
        ServerSnapshot(ts=5, source="llamacpp", running=2, generation_tokens=400),
    ]
    s = window_stats(llama, 0, 0, 5)
    assert s.generation_tok_s == 80 and s.preemptions is None and s.kv_max is None and s.latency == {}
    assert window_stats([], 0, 0, 5).samples == 0  # no scrapes: empty stats, no error


def test_snapshot_json_round_trip(tmp_path):
    s = parse_metrics(fixture("vllm_0_33_metrics.txt"), ts=5.0)
    path = tmp_path / "server_metrics.jsonl"
    path.write_text(json.dumps(s.to_json()) + "\n" + '{"ts": 6.0, "runn')  # torn last line
    [back] = read_snapshots(path)
    assert back == s
    assert read_snapshots(tmp_path / "absent.jsonl") == []


# ---------------------------------------------------------------------------------------- simulator


def test_real_scrapes_from_the_simulator():
    """Two scrapes taken from `swarm sim --max-num-seqs 4` serving 12 concurrent requests."""
    mid = parse_metrics(fixture("sim_metrics_mid.txt"), ts=1.0)
    end = parse_metrics(fixture("sim_metrics_end.txt"), ts=3.0)
    assert (mid.source, mid.model) == ("vllm", "qwen3.6-27b")
    assert (mid.running, mid.waiting) == (4, 3) and 0 < mid.kv_usage < 1
    assert sum(end.request_success.values()) == 12 and end.histograms["ttft"].count == 12
    s = window_stats([mid, end], 0, 1.0, 3.0)
    assert s.requests == 12 - sum(mid.request_success.values())
    assert s.generation_tok_s == pytest.approx((end.generation_tokens - mid.generation_tokens) / 2)
    assert s.latency["ttft"]["count"] == 12 - mid.histograms["ttft"].count
