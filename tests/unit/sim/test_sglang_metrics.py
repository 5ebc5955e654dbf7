"""swarm/sim/sglang_metrics.py: SGLang's /metrics, held to `python/sglang/srt/metrics/collector.py`
(sgl-project/sglang at 00ae9c15): names, types, HELP, label sets, default buckets; the counters
are what the finished requests carried."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from swarm.sim.engine import Engine, Sequence
from swarm.sim.sglang_metrics import ITL_BUCKETS, SCHEDULER_LABELS, TTFT_BUCKETS, SglangMetrics
from tests.unit.sim.helpers import small_profile

SCHED = set(SCHEDULER_LABELS)
# collector.py: name -> (type, HELP, labels)
EXPECTED = {
    "sglang:num_running_reqs": ("gauge", "The number of running requests.", SCHED),
    "sglang:num_used_tokens": ("gauge", "The number of used tokens.", SCHED),
    "sglang:token_usage": ("gauge", "The token usage.", SCHED),
    "sglang:num_queue_reqs": ("gauge", "The number of requests in the waiting queue.", SCHED),
    "sglang:num_grammar_queue_reqs": ("gauge", "The number of requests in the grammar waiting queue.", SCHED),
    "sglang:max_total_num_tokens": ("gauge", "Maximum total number of tokens in the KV cache pool.", SCHED),
    "sglang:num_retracted_requests": ("counter", "Total number of retracted requests.", SCHED),
    "sglang:queue_time_seconds": ("histogram", "Histogram of queueing time in seconds.", SCHED),
    "sglang:prompt_tokens": ("counter", "Number of prefill tokens processed.", {"model_name"}),
    "sglang:generation_tokens": ("counter", "Number of generation tokens processed.", {"model_name"}),
    "sglang:cached_tokens": ("counter", "Number of cached prompt tokens.", {"model_name"}),
    "sglang:num_requests": ("counter", "Number of requests processed.", {"model_name"}),
    "sglang:num_aborted_requests": ("counter", "Number of requests aborted.", {"model_name"}),
    "sglang:time_to_first_token_seconds": (
        "histogram",
        "Histogram of time to first token in seconds.",
        {"model_name"},
    ),
    "sglang:inter_token_latency_seconds": (
        "histogram",
        "Histogram of inter-token latency in seconds.",
        {"model_name"},
    ),
    "sglang:e2e_request_latency_seconds": (
        "histogram",
        "Histogram of End-to-end request latency in seconds",
        {"model_name"},
    ),
}


def _finished(prompt: int, generated: int, cached: int) -> Sequence:
    seq = Sequence("r", prompt, generated, arrival_time=10.0)
    seq.scheduled_time, seq.first_token_time, seq.last_token_time = 10.5, 11.0, 12.0
    seq.finish_time, seq.generated, seq.cached_tokens = 12.0, generated, cached
    return seq


def test_the_page_has_sglang_s_names_types_help_and_labels():
    m = SglangMetrics(Engine(small_profile()), "m")
    fams = {f.name: f for f in text_string_to_metric_families(m.render().decode())}
    assert {
        n: (f.type, f.documentation, {k for s in f.samples for k in s.labels} - {"le"})
        for n, f in fams.items()
    } == EXPECTED
    sched = fams["sglang:num_running_reqs"].samples[0].labels
    assert sched == {
        "model_name": "m",
        "engine_type": "unified",
        "tp_rank": "0",
        "pp_rank": "0",
        "moe_ep_rank": "0",
    }
    bounds = [
        float(s.labels["le"]) for s in fams["sglang:time_to_first_token_seconds"].samples if "le" in s.labels
    ]
    assert bounds[:-1] == list(TTFT_BUCKETS) and len(ITL_BUCKETS) == 23


def test_finished_requests_add_their_tokens_and_the_engine_feeds_ttft_and_itl():
    eng = Engine(small_profile())
    m = SglangMetrics(eng, "m")
    assert eng.ttft is m.ttft and eng.itl is m.itl  # observed per token by the engine
    m.observe_success(_finished(100, 7, 32), "stop")
    m.observe_success(_finished(20, 3, 0), "length")
    samples = {
        s.name: s.value
        for f in text_string_to_metric_families(m.render().decode())
        for s in f.samples
        if "le" not in s.labels
    }
    assert samples["sglang:prompt_tokens_total"] == 120
    assert samples["sglang:generation_tokens_total"] == 10
    assert samples["sglang:cached_tokens_total"] == 32
    assert samples["sglang:num_requests_total"] == 2
    assert samples["sglang:e2e_request_latency_seconds_count"] == 2
    assert samples["sglang:e2e_request_latency_seconds_sum"] == 4.0
    assert samples["sglang:queue_time_seconds_sum"] == 1.0
    assert samples["sglang:max_total_num_tokens"] == 1024


def test_a_request_the_engine_dropped_is_counted_aborted_not_processed():
    """A client gone (`--cancel`): the engine drops the sequence and SGLang's tokenizer manager
    counts it in `num_aborted_requests_total`, never in `num_requests_total`."""
    eng = Engine(small_profile())
    m = SglangMetrics(eng, "m")
    seq = Sequence("gone", 10, 5, arrival_time=1.0)
    eng.add(seq)
    eng.abort(seq)
    eng.abort(seq)  # (a second abort of the same request counts nothing)
    samples = {
        s.name: s.value for f in text_string_to_metric_families(m.render().decode()) for s in f.samples
    }
    assert samples["sglang:num_aborted_requests_total"] == 1 and samples["sglang:num_requests_total"] == 0
