"""TensorRT-LLM's Prometheus page (`swarm sim --server trtllm`, at /prometheus/metrics as
`trtllm-serve` mounts it): the `trtllm_` families of `tensorrt_llm/metrics/collector.py`
(NVIDIA/TensorRT-LLM at 050f80de, docs/server-families.md), names, HELP text, labels and default
buckets as that file registers them.

Labels: `model_name` and `engine_type`, both the literal "undefined" (`openai_server.py` builds
the collector so), plus `finished_reason` on the success counter. The per-request series (the
success counter, the token counters and every histogram) are recorded when a request finishes,
as `log_request_metrics_dict` does; the iteration gauges (running, waiting, KV blocks) are the
engine's state at scrape time. Not served: the families the simulator has nothing to feed
(memory, perplexity, spec decoding, host KV tiers, config info, per-HTTP-code errors).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from swarm.core.buckets import VLLM_E2E_BUCKETS, VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS
from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.metrics import FINISH_REASONS, FastHistogram

PATH = "/prometheus/metrics"
LABELS = ("model_name", "engine_type")
LABEL_VALUES = ["undefined", "undefined"]
# fmt: off
PREFILL_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0,
    640.0, 2560.0)
# fmt: on
_HISTOGRAMS = (  # attribute, name, HELP, buckets
    (
        "e2e",
        "e2e_request_latency_seconds",
        "Histogram of end to end request latency in seconds.",
        VLLM_E2E_BUCKETS,
    ),
    (
        "ttft",
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        VLLM_TTFT_BUCKETS,
    ),
    (
        "tpot",
        "time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        VLLM_ITL_BUCKETS,
    ),
    (
        "queue",
        "request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        VLLM_E2E_BUCKETS,
    ),
    (
        "prefill",
        "request_prefill_time_seconds",
        "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).",
        PREFILL_BUCKETS,
    ),
    (
        "decode",
        "request_decode_time_seconds",
        "Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).",
        VLLM_E2E_BUCKETS,
    ),
    (
        "inference",
        "request_inference_time_seconds",
        "Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).",
        VLLM_E2E_BUCKETS,
    ),
)
_CACHED_HELP = (
    "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process "
    "restarts, not when the KV cache is flushed or evicted."
)


class TrtllmMetrics:
    """`trtllm-serve`'s MetricsCollector over the simulator's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.hist = {attr: FastHistogram(buckets) for attr, _, _, buckets in _HISTOGRAMS}
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def counters(self, model: str) -> None:
        """No per-model tally: TensorRT-LLM records its counters per finished request."""
        return None

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        self.success[finish_reason] += 1
        self.prompt_tokens += seq.prompt_tokens
        self.generation_tokens += seq.generated
        self.cached_tokens += seq.cached_tokens
        arrival, sched, first, last = (
            seq.arrival_time,
            seq.scheduled_time,
            seq.first_token_time,
            seq.last_token_time,
        )
        if sched is None or first is None or last is None:
            return
        h = self.hist
        h["e2e"].observe((seq.finish_time or last) - arrival)
        h["ttft"].observe(first - arrival)
        if seq.generated > 1:
            h["tpot"].observe((last - first) / (seq.generated - 1))
        h["queue"].observe(sched - arrival)
        h["prefill"].observe(first - sched)
        h["decode"].observe(last - first)
        h["inference"].observe(last - sched)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # prometheus_client collector protocol
    def collect(self) -> Iterator[Metric]:
        success = CounterMetricFamily(
            "trtllm_request_success",
            "Count of successfully processed requests.",
            labels=[*LABELS, "finished_reason"],
        )
        for reason, n in self.success.items():
            if n:  # a child appears with its first request, as prometheus_client's labels() makes it
                success.add_metric([*LABEL_VALUES, reason], n)
        yield success
        for attr, name, doc, _ in _HISTOGRAMS:
            fam = HistogramMetricFamily(f"trtllm_{name}", doc, labels=LABELS)
            self.hist[attr].add_to(fam, LABEL_VALUES)
            yield fam
        eng = self.engine
        for name, doc, value in (
            ("prompt_tokens", "Cumulative number of prompt (input) tokens processed.", self.prompt_tokens),
            (
                "generation_tokens",
                "Cumulative number of generation (output) tokens produced.",
                self.generation_tokens,
            ),
            ("prompt_cached_tokens", _CACHED_HELP, self.cached_tokens),
        ):
            c = CounterMetricFamily(f"trtllm_{name}", doc, labels=LABELS)
            c.add_metric(LABEL_VALUES, value)
            yield c
        pool = eng.pool
        for name, doc, value in (
            ("kv_cache_utilization", "KV cache utilization", eng.kv_cache_usage),
            ("num_requests_running", "Number of active requests", len(eng.running)),
            ("num_requests_waiting", "Number of queued requests", len(eng.waiting)),
            ("kv_cache_max_blocks", "Maximum number of KV cache blocks", pool.num_blocks),
            ("kv_cache_free_blocks", "Number of free KV cache blocks", pool.num_free),
            ("kv_cache_used_blocks", "Number of used KV cache blocks", pool.used),
            ("kv_cache_tokens_per_block", "Number of tokens per KV cache block", eng.bs),
        ):
            g = GaugeMetricFamily(f"trtllm_{name}", doc, labels=LABELS)
            g.add_metric(LABEL_VALUES, value)
            yield g
