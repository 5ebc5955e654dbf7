"""swarm/sim/tgi_metrics.py: TGI's /metrics, held to text-generation-inference v3.3.7
(`router/src/server.rs`: names, describe_* HELP, buckets; `backends/v3/src/*.rs`: the gauges):
no `_total` on counters, no model label, no TTFT histogram, no token counters."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from swarm.sim.engine import Engine, Sequence
from swarm.sim.tgi_metrics import TgiMetrics, duration_buckets
from tests.unit.sim.helpers import small_profile

TYPES = {
    "tgi_request_count": "counter",
    "tgi_request_failure": "counter",
    "tgi_request_success": "counter",
    "tgi_batch_current_max_tokens": "gauge",
    "tgi_batch_current_size": "gauge",
    "tgi_batch_max_total_tokens": "gauge",
    "tgi_queue_size": "gauge",
    "tgi_request_duration": "histogram",
    "tgi_request_validation_duration": "histogram",
    "tgi_request_queue_duration": "histogram",
    "tgi_request_inference_duration": "histogram",
    "tgi_request_mean_time_per_token_duration": "histogram",
    "tgi_request_input_length": "histogram",
    "tgi_request_generated_tokens": "histogram",
}


def _finished(prompt: int, generated: int) -> Sequence:
    seq = Sequence("r", prompt, generated, arrival_time=10.0)
    seq.scheduled_time, seq.first_token_time, seq.last_token_time = 10.5, 11.0, 12.5
    seq.finish_time, seq.generated = 12.5, generated
    return seq


def test_the_page_has_tgi_s_names_types_help_and_buckets():
    m = TgiMetrics(Engine(small_profile()), 512)
    m.arrived(10)
    m.failed("validation")
    m.observe_success(_finished(10, 4), "stop")
    text = m.render().decode()
    assert "tgi_request_count 1\n" in text and "_total " not in text  # the exporter adds no suffix
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert {n: f.type for n, f in fams.items()} == TYPES
    assert fams["tgi_request_duration"].documentation == "Total time spent processing the request"
    assert fams["tgi_request_failure"].documentation == ""  # server.rs describes none
    assert all(set(s.labels) <= {"le", "err"} for f in fams.values() for s in f.samples)
    bounds = [float(s.labels["le"]) for s in fams["tgi_request_duration"].samples if "le" in s.labels]
    assert bounds[:-1] == list(duration_buckets()) and len(bounds) == 36 and bounds[0] == 0.0001 * 1.5
    lengths = [float(s.labels["le"]) for s in fams["tgi_request_input_length"].samples if "le" in s.labels]
    assert len(lengths) == 101 and abs(lengths[-2] - 511) < 1e-9  # (511 / 100) x 100, as Rust computes it


def test_requests_failures_and_successes_are_counted_where_tgi_counts_them():
    m = TgiMetrics(Engine(small_profile()), 512)
    for prompt in (10, 20, None):
        m.arrived(prompt)
    m.failed("validation")
    m.failed("overloaded")
    m.observe_success(_finished(10, 4), "stop")
    m.observe_success(_finished(20, 6), "length")
    v = {
        (s.name, s.labels.get("err")): s.value
        for f in text_string_to_metric_families(m.render().decode())
        for s in f.samples
        if "le" not in s.labels
    }
    assert v[("tgi_request_count_total", None)] == 3
    assert (
        v[("tgi_request_failure_total", "validation")] == v[("tgi_request_failure_total", "overloaded")] == 1
    )
    assert v[("tgi_request_success_total", None)] == 2
    assert v[("tgi_request_input_length_sum", None)] == 30  # recorded at validation
    assert v[("tgi_request_generated_tokens_sum", None)] == 10  # the successes' only
    assert v[("tgi_request_mean_time_per_token_duration_sum", None)] == 2 / 4 + 2 / 6  # prefill included
    assert v[("tgi_batch_max_total_tokens", None)] == 1024


def test_the_batch_reserves_each_requests_blocks_for_its_limit_not_for_what_it_made():
    """backends/v3/src/queue.rs allocates input + max_new_tokens - 1 tokens of blocks at admission
    and the gauge is the batch's blocks x BLOCK_SIZE: a request stopping at EOS after 32 of its 64
    allowed tokens still holds 20 blocks of 16 (256 + 63 tokens); max_new_tokens is cut to
    DEFAULT_GENERATION_LENGTH (1024). Against the budget, tgi_batch_max_total_tokens (the pool)."""
    eng = Engine(small_profile(kv_cache_tokens=4096, max_model_len=2048))
    eng.running = [
        Sequence("a", 256, 32, max_tokens=64),  # EOS at 32: reserved for 64
        Sequence("b", 10, 4, max_tokens=1),  # 10 tokens: one block
        Sequence("c", 100, 2000, max_tokens=1900),  # chunked: 100 + 1024 - 1 -> 71 blocks
    ]
    v = {
        s.name: s.value
        for f in text_string_to_metric_families(TgiMetrics(eng, 2048).render().decode())
        for s in f.samples
    }
    assert v["tgi_batch_current_max_tokens"] == 16 * (20 + 1 + 71)
    assert v["tgi_batch_current_size"] == 3 and v["tgi_batch_max_total_tokens"] == 4096
