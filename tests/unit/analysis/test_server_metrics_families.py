"""Every server family's /metrics read into the same fields (server_parse.parse_metrics with the
names of swarm/core/server_families.py): SGLang, TGI and TensorRT-LLM scrapes as their exporters write
them (tests/unit/analysis/family_texts.py), a field the family lacks None, the family forced.
The tables and the detection alone: tests/unit/core/test_server_families.py."""

from __future__ import annotations

import pytest

from swarm.analysis.server_metrics import stage_stats
from swarm.analysis.server_parse import parse_metrics
from swarm.core.server_families import TGI
from tests.unit.analysis import family_texts as ft


def test_sglang_scrape_normalised_lowest_tp_rank_and_no_zeros_for_what_it_lacks():
    text = ft.sglang(
        64, 12, 0.41, prompt=9000, generation=2500, cached=3000, retracted=2, requests=40, tp_ranks=2
    )
    assert 'tp_rank="1"' in text  # every TP rank reports the same batch ...
    s = parse_metrics(text, ts=5.0, model="qwen")
    assert (s.source, s.model) == ("sglang", "qwen")
    assert (s.running, s.waiting, s.kv_usage) == (64, 12, 0.41)  # ... read once, not 128 running
    assert (s.prompt_tokens, s.generation_tokens, s.preemptions) == (9000, 2500, 2)
    assert (s.prefix_queries, s.prefix_hits) == (9000, 3000)  # cached_tokens over prompt tokens
    assert s.request_success == {"finished": 40}
    # no spec-decoding counters in SGLang: absent, not 0; no prefill/decode histograms either
    assert (s.spec_drafts, s.spec_draft_tokens, s.spec_accepted) == (None, None, None)
    assert set(s.histograms) == {"ttft"}


def test_sglang_data_parallel_ranks_are_summed_and_token_usage_averaged():
    text = ft.sglang((10, 12), (2, 3), (0.5, 0.7), retracted=4, tp_ranks=2)
    assert 'dp_rank="1"' in text and 'tp_rank="1"' in text
    s = parse_metrics(text)
    assert (s.running, s.waiting, s.preemptions) == (22, 5, 4) and s.kv_usage == pytest.approx(0.6)


def test_tgi_scrape_normalised_its_budget_proxy_and_what_it_lacks():
    s = parse_metrics(
        ft.tgi(32, 7, 45_000, 50_000, success=90, input_sum=120_000, generated_sum=11_000, requests=92),
        ts=1.0,
    )
    assert (s.source, s.model) == ("tgi", None)
    assert (s.running, s.waiting) == (32, 7)
    assert s.kv_usage == pytest.approx(0.9)  # tgi_batch_current_max_tokens / tgi_batch_max_total_tokens
    assert (s.prompt_tokens, s.generation_tokens) == (120_000, 11_000)  # the length histograms' sums
    assert s.request_success == {"finished": 90}
    assert (s.preemptions, s.prefix_queries, s.prefix_hits, s.spec_drafts) == (None, None, None, None)
    assert set(s.histograms) == {"e2e"}  # no TTFT, no ITL: absent (no queue histogram in this scrape)
    assert TGI.lacks("ttft") and TGI.lacks("itl") and not TGI.lacks("queue")


def test_tgi_reserving_past_its_budget_is_a_full_one_not_a_failed_check():
    """The simulator's TGI face reserves past tgi_batch_max_total_tokens (it admits on blocks held):
    a share of 1.1 is a spent budget, read as 1, never a fraction failing its check (a CI run's
    test_family_diagnosis[tgi] withheld its kv_bound so)."""
    s = parse_metrics(ft.tgi(40, 9, 55_000, 50_000), ts=1.0)
    assert s.kv_usage == 1.0 and not s.rejected


def test_tgi_without_a_budget_has_no_kv_figure():
    s = parse_metrics(ft.tgi(3, 0, 0, 0))
    assert s.kv_usage is None  # the budget is set after warm-up: 0 is not a full cache


@pytest.mark.parametrize("prefix", ["trtllm_", "trtllm:"])
def test_trtllm_scrape_normalised_current_and_dynamo_names(prefix):
    s = parse_metrics(ft.trtllm(prefix, running=3, waiting=1, kv=0.42), model="my-model")
    assert (s.source, s.model) == ("trtllm", None)  # model_name="undefined" is no model
    assert (s.running, s.waiting, s.kv_usage) == (3, 1, 0.42)
    assert (s.prompt_tokens, s.generation_tokens, s.prefix_queries, s.prefix_hits) == (5000, 700, 5000, 1200)
    assert (s.spec_drafts, s.spec_draft_tokens, s.spec_accepted) == (None, 90, 60)
    assert s.preemptions is None
    assert s.request_success == {"stop": 9, "length": 1}
    assert set(s.histograms) == {"ttft", "itl", "e2e", "queue"}
    assert s.histograms["ttft"].count == 10 and s.histograms["ttft"].sum == 0.55


def test_trtllm_older_collector_unprefixed_has_no_gauges():
    s = parse_metrics(ft.trtllm(""))
    assert s.source == "trtllm"
    assert (s.running, s.waiting, s.kv_usage, s.prompt_tokens) == (None, None, None, None)
    assert s.request_success == {"stop": 9, "length": 1} and "ttft" in s.histograms


def test_the_override():
    text = ft.sglang(5, 0, 0.1)
    forced = parse_metrics(text, family="tgi")  # read with TGI's names: none there, nothing invented
    assert forced.source == "tgi" and (forced.running, forced.waiting, forced.kv_usage) == (None, None, None)
    assert parse_metrics(text, family="sglang").running == 5


def test_per_stage_statistics_from_sglang_and_tgi_counters_and_histograms():
    """Counter deltas, rates and histogram quantiles per stage window, from the families' own series."""
    n = len(ft.SGLANG_TTFT_LE) + 1
    before = [0.0] * n
    after = [0.0] + [10.0] * (n - 1)  # ten first tokens, all between 0.1 and 0.2 s
    snaps = [
        parse_metrics(
            ft.sglang(4, 0, 0.2, prompt=1000, generation=100, cached=250, ttft_counts=before), ts=0.0
        ),
        parse_metrics(
            ft.sglang(
                4,
                1,
                0.3,
                prompt=3000,
                generation=500,
                cached=1250,
                retracted=1,
                requests=10,
                ttft_counts=after,
                ttft_sum=1.5,
            ),
            ts=10.0,
        ),
    ]
    st = stage_stats(snaps, [(0, 0.0, 10.0)])[0]
    assert (st.prompt_tokens, st.generation_tokens, st.preemptions) == (2000, 400, 1)
    assert st.prompt_tok_s == 200 and st.generation_tok_s == 40
    assert st.prefix_hit_rate == pytest.approx(1000 / 2000) and st.requests == 10
    assert st.latency["ttft"]["count"] == 10 and st.latency["ttft"]["mean"] == pytest.approx(0.15)
    assert st.latency["ttft"]["p50"] == pytest.approx(0.15)  # half-way through the 0.1-0.2 bucket
    assert st.source == "sglang"

    e0 = {"counts": [0.0] * (len(ft.TGI_DURATION_LE) + 1), "sum": 0.0}
    k = next(i for i, b in enumerate(ft.TGI_DURATION_LE) if b >= 1.0)  # the bucket that holds 1 s
    e1 = {"counts": [0.0] * k + [4.0] * (len(ft.TGI_DURATION_LE) + 1 - k), "sum": 4.0}
    tgi = [
        parse_metrics(
            ft.tgi(2, 0, 100, success=1, input_sum=50, generated_sum=10, requests=1, e2e=e0), ts=0.0
        ),
        parse_metrics(
            ft.tgi(2, 0, 100, success=5, input_sum=450, generated_sum=90, requests=5, e2e=e1), ts=4.0
        ),
    ]
    st = stage_stats(tgi, [(0, 0.0, 4.0)])[0]
    assert (st.prompt_tokens, st.generation_tokens, st.requests) == (400, 80, 4)
    assert st.preemptions is None and st.prefix_hit_rate is None  # absent, not 0
    assert st.latency["e2e"]["mean"] == 1.0 and "ttft" not in st.latency
    lo, hi = ft.TGI_DURATION_LE[k - 1], ft.TGI_DURATION_LE[k]
    assert lo < st.latency["e2e"]["p50"] <= hi
