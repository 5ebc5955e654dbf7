"""swarm/sim/trtllm_metrics.py: trtllm-serve's Prometheus page, held to
`tensorrt_llm/metrics/collector.py` (NVIDIA/TensorRT-LLM at 050f80de): `trtllm_` names, types,
HELP, the "undefined" labels of `openai_server.py`; the per-request series recorded at finish."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from swarm.sim.engine import Engine, Sequence
from swarm.sim.trtllm_metrics import TrtllmMetrics
from tests.unit.sim.helpers import small_profile

LABELS = {"model_name", "engine_type"}
TYPES = {
    "trtllm_request_success": "counter",
    "trtllm_e2e_request_latency_seconds": "histogram",
    "trtllm_time_to_first_token_seconds": "histogram",
    "trtllm_time_per_output_token_seconds": "histogram",
    "trtllm_request_queue_time_seconds": "histogram",
    "trtllm_request_prefill_time_seconds": "histogram",
    "trtllm_request_decode_time_seconds": "histogram",
    "trtllm_request_inference_time_seconds": "histogram",
    "trtllm_prompt_tokens": "counter",
    "trtllm_generation_tokens": "counter",
    "trtllm_prompt_cached_tokens": "counter",
    "trtllm_kv_cache_utilization": "gauge",
    "trtllm_num_requests_running": "gauge",
    "trtllm_num_requests_waiting": "gauge",
    "trtllm_kv_cache_max_blocks": "gauge",
    "trtllm_kv_cache_free_blocks": "gauge",
    "trtllm_kv_cache_used_blocks": "gauge",
    "trtllm_kv_cache_tokens_per_block": "gauge",
}


def _finished(prompt: int, generated: int, cached: int) -> Sequence:
    seq = Sequence("r", prompt, generated, arrival_time=10.0)
    seq.scheduled_time, seq.first_token_time, seq.last_token_time = 10.5, 11.0, 13.0
    seq.finish_time, seq.generated, seq.cached_tokens = 13.0, generated, cached
    return seq


def _families(m: TrtllmMetrics):
    return {f.name: f for f in text_string_to_metric_families(m.render().decode())}


def test_the_page_has_trtllm_s_names_types_and_undefined_labels():
    m = TrtllmMetrics(Engine(small_profile()))
    m.observe_success(_finished(10, 5, 0), "stop")
    fams = _families(m)
    assert {n: f.type for n, f in fams.items()} == TYPES
    for name, fam in fams.items():
        extra = {"finished_reason"} if name == "trtllm_request_success" else set()
        for s in fam.samples:
            assert set(s.labels) - {"le"} == LABELS | extra
            assert s.labels["model_name"] == s.labels["engine_type"] == "undefined"
    assert fams["trtllm_request_success"].documentation == "Count of successfully processed requests."
    assert fams["trtllm_kv_cache_utilization"].documentation == "KV cache utilization"


def test_counters_and_histograms_are_recorded_per_finished_request():
    m = TrtllmMetrics(Engine(small_profile()))
    m.observe_success(_finished(100, 5, 48), "stop")
    m.observe_success(_finished(50, 3, 0), "length")
    v = {
        (s.name, s.labels.get("finished_reason")): s.value
        for f in _families(m).values()
        for s in f.samples
        if "le" not in s.labels
    }
    assert v[("trtllm_request_success_total", "stop")] == v[("trtllm_request_success_total", "length")] == 1
    assert v[("trtllm_prompt_tokens_total", None)] == 150
    assert v[("trtllm_generation_tokens_total", None)] == 8
    assert v[("trtllm_prompt_cached_tokens_total", None)] == 48
    assert v[("trtllm_time_to_first_token_seconds_sum", None)] == 2.0  # first token 1 s after arrival, twice
    assert v[("trtllm_time_per_output_token_seconds_sum", None)] == 2 / 4 + 2 / 2
    assert v[("trtllm_kv_cache_max_blocks", None)] == 1024 / 16
