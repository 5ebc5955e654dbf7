"""The simulator's `/metrics`: vLLM 0.33 names, labels and default buckets, per served model.

Hot-path observations go into `FastHistogram` (a bisect and two adds; prometheus_client's own
Histogram takes a lock per call), and one custom collector turns the engine's counters and
these histograms into metric families at scrape time, rendered by prometheus_client from a
dedicated registry.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from swarm.core.buckets import (
    VLLM_E2E_BUCKETS,
    VLLM_ITERATION_TOKEN_BUCKETS,
    VLLM_ITL_BUCKETS,
    VLLM_TTFT_BUCKETS,
)
from swarm.sim.engine import Engine, ModelCounters
from swarm.sim.engine import Sequence as EngineSequence

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

    def add_to(self, fam: HistogramMetricFamily, labels: list[str]) -> None:
        cum = 0
        buckets = []
        for bound, c in zip(self.bounds, self.counts, strict=False):
            cum += c
            buckets.append((floatToGoString(bound), cum))
        buckets.append(("+Inf", cum + self.counts[-1]))
        fam.add_metric(labels, buckets, self.sum)


class ModelSeries:
    """The per-request series of one served model: latency and length histograms, successes by
    finish reason, and its token counters (`ModelCounters`, fed by the engine per sequence)."""

    def __init__(self, max_len: int) -> None:
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
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.counters = ModelCounters(itl=self.itl, ttft=self.ttft)


_HISTOGRAMS = (
    ("prompt_tokens", "vllm:request_prompt_tokens", "Number of prefill tokens processed."),
    ("generation_tokens", "vllm:request_generation_tokens", "Number of generation tokens processed."),
    ("ttft", "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    ("itl", "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
    (
        "tpot",
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
    ),
    ("e2e", "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
    ("queue", "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
    (
        "inference",
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
    ),
    ("prefill", "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
    ("decode", "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
)


class SimMetrics:
    """All of the simulator's Prometheus metrics: the engine's (gauges, preemptions, prefix cache,
    tokens per step) labelled with the first served model, the base; and the per-request series
    (successes, token counters, latency and length histograms) per served model.

    vLLM labels everything with the base model's name, LoRA requests included; the simulator keeps
    each served model apart instead, so that per-model totals can be checked against the swarm's.
    With one model the output is vLLM's exactly (the token counters are the engine's)."""

    def __init__(self, engine: Engine, model_name: str | Sequence[str]) -> None:
        names = (model_name,) if isinstance(model_name, str) else tuple(model_name)
        self.engine = engine
        self.labels = [names[0], ENGINE_LABEL]
        max_len = engine.profile.max_model_len
        self.series = {name: ModelSeries(max_len) for name in names}
        base = self.series[names[0]]
        self.iteration_tokens = FastHistogram(ITERATION_TOKEN_BUCKETS)
        engine.itl = base.itl
        engine.ttft = base.ttft
        engine.iteration_tokens = self.iteration_tokens
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def counters(self, model: str) -> ModelCounters:
        """What a sequence of `model` carries (`Sequence.tally`) for the engine to count it."""
        return self.series[model].counters

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        """Record a request that finished normally (no injected fault, response complete)."""
        m = self.series[model] if model is not None else self.series[self.labels[0]]
        m.success[finish_reason] += 1
        m.prompt_tokens.observe(seq.prompt_tokens)
        m.generation_tokens.observe(seq.generated)
        arrival, first, last = seq.arrival_time, seq.first_token_time, seq.last_token_time
        sched = seq.scheduled_time
        if first is None or last is None or sched is None:
            return
        m.e2e.observe((seq.finish_time or last) - arrival)
        m.queue.observe(sched - arrival)
        m.prefill.observe(first - sched)
        m.decode.observe(last - first)
        m.inference.observe(last - sched)
        if seq.generated > 1:
            m.tpot.observe((last - first) / (seq.generated - 1))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # prometheus_client collector protocol
    def collect(self) -> Iterator[Metric]:
        eng, labels = self.engine, self.labels
        names = ["model_name", "engine"]
        several = len(self.series) > 1

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(labels, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(labels, value)
            return c

        def per_model(name: str, doc: str, attr: str) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=names)
            if not several:  # the engine's own count (sequences without a tally included)
                c.add_metric(labels, getattr(eng.counters, attr))
                return c
            for model, m in self.series.items():
                c.add_metric([model, ENGINE_LABEL], getattr(m.counters, attr))
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
        yield per_model("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens")
        yield per_model(
            "vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"
        )
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
        for model, m in self.series.items():
            for reason, n in m.success.items():
                success.add_metric([model, ENGINE_LABEL, reason], n)
        yield success
        for attr, name, doc in _HISTOGRAMS[:2]:
            yield self._histogram(attr, name, doc)
        fam = HistogramMetricFamily(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", labels=names
        )
        self.iteration_tokens.add_to(fam, labels)
        yield fam
        for attr, name, doc in _HISTOGRAMS[2:]:
            yield self._histogram(attr, name, doc)

    def _histogram(self, attr: str, name: str, doc: str) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=["model_name", "engine"])
        for model, m in self.series.items():
            getattr(m, attr).add_to(fam, [model, ENGINE_LABEL])
        return fam
