"""The simulator's `/metrics`: vLLM 0.33 names, labels and default buckets.

Hot-path observations go into `FastHistogram` (a bisect and two adds; prometheus_client's own
Histogram takes a lock per call), and one custom collector turns the engine's counters and
these histograms into metric families at scrape time, rendered by prometheus_client from a
dedicated registry.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from swarm.core.buckets import (
    VLLM_E2E_BUCKETS,
    VLLM_ITERATION_TOKEN_BUCKETS,
    VLLM_ITL_BUCKETS,
    VLLM_TTFT_BUCKETS,
)
from swarm.sim.engine import Engine, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ENGINE_LABEL = "0"

TTFT_BUCKETS = VLLM_TTFT_BUCKETS
ITL_BUCKETS = VLLM_ITL_BUCKETS
REQUEST_LATENCY_BUCKETS = VLLM_E2E_BUCKETS
ITERATION_TOKEN_BUCKETS = VLLM_ITERATION_TOKEN_BUCKETS
FINISH_REASONS = ("stop", "length")


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to `max_value` (vLLM's token-count buckets)."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > max_value:
                return tuple(out)
            out.append(v)
        exponent += 1


class FastHistogram:
    """Per-bucket counts (not cumulative) + sum; `observe` is cheap enough for every token."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def family(self, name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=["model_name", "engine"])
        cum = 0
        buckets = []
        for bound, c in zip(self.bounds, self.counts, strict=False):
            cum += c
            buckets.append((floatToGoString(bound), cum))
        buckets.append(("+Inf", cum + self.counts[-1]))
        fam.add_metric(labels, buckets, self.sum)
        return fam


class SimMetrics:
    """All of the simulator's Prometheus metrics for one served model."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.engine = engine
        self.labels = [model_name, ENGINE_LABEL]
        max_len = engine.profile.max_model_len
        self.ttft = FastHistogram(TTFT_BUCKETS)
        self.itl = FastHistogram(ITL_BUCKETS)
        self.tpot = FastHistogram(ITL_BUCKETS)
        self.e2e = FastHistogram(REQUEST_LATENCY_BUCKETS)
        self.queue = FastHistogram(REQUEST_LATENCY_BUCKETS)
        self.prefill = FastHistogram(REQUEST_LATENCY_BUCKETS)
        self.decode = FastHistogram(REQUEST_LATENCY_BUCKETS)
        self.inference = FastHistogram(REQUEST_LATENCY_BUCKETS)
        self.prompt_tokens = FastHistogram(buckets_1_2_5(max_len))
        self.generation_tokens = FastHistogram(buckets_1_2_5(max_len))
        self.iteration_tokens = FastHistogram(ITERATION_TOKEN_BUCKETS)
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        engine.itl = self.itl
        engine.iteration_tokens = self.iteration_tokens
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def observe_success(self, seq: Sequence, finish_reason: str) -> None:
        """Record a request that finished normally (no injected fault, response complete)."""
        self.success[finish_reason] += 1
        self.prompt_tokens.observe(seq.prompt_tokens)
        self.generation_tokens.observe(seq.generated)
        arrival, first, last = seq.arrival_time, seq.first_token_time, seq.last_token_time
        sched = seq.scheduled_time
        if first is None or last is None or sched is None:
            return
        self.ttft.observe(first - arrival)
        self.e2e.observe((seq.finish_time or last) - arrival)
        self.queue.observe(sched - arrival)
        self.prefill.observe(first - sched)
        self.decode.observe(last - first)
        self.inference.observe(last - sched)
        if seq.generated > 1:
            self.tpot.observe((last - first) / (seq.generated - 1))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # prometheus_client collector protocol
    def collect(self) -> Iterator[Metric]:
        eng, labels = self.engine, self.labels
        names = ["model_name", "engine"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(labels, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(labels, value)
            return c

        yield gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", len(eng.running)
        )
        yield gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(eng.waiting)
        )
        yield gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", eng.kv_cache_usage
        )
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=["block_size", "enable_prefix_caching", "num_gpu_blocks"],
        )
        info.add_metric([str(eng.bs), str(eng.caching), str(eng.pool.num_blocks)], 1.0)
        yield info
        c = eng.counters
        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens)
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens)
        yield counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            c.prefix_queries,
        )
        yield counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", c.prefix_hits
        )
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*names, "finished_reason"],
        )
        for reason, n in self.success.items():
            success.add_metric([*labels, reason], n)
        yield success
        for hist, name, doc in (
            (self.prompt_tokens, "vllm:request_prompt_tokens", "Number of prefill tokens processed."),
            (
                self.generation_tokens,
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
            ),
            (
                self.iteration_tokens,
                "vllm:iteration_tokens_total",
                "Histogram of number of tokens per engine_step.",
            ),
            (self.ttft, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds."),
            (self.itl, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
            (
                self.tpot,
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
            ),
            (self.e2e, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
            (
                self.queue,
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
            ),
            (
                self.inference,
                "vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.",
            ),
            (
                self.prefill,
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
            ),
            (
                self.decode,
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
            ),
        ):
            yield hist.family(name, doc, labels)
