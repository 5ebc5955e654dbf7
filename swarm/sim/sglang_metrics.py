"""SGLang's /metrics (`swarm sim --server sglang`): the `sglang:` families of
`python/sglang/srt/metrics/collector.py` (sgl-project/sglang at 00ae9c15, docs/server-families.md),
names, HELP text, label sets and default buckets as that file registers them.

Two label sets, as SGLang has two collectors: the scheduler's (`model_name`, `engine_type`,
`tp_rank`, `pp_rank`, `moe_ep_rank`: one unified engine, rank 0) on the running/queue/token gauges,
the retraction counter and the queue-time histogram; the tokenizer's (`model_name`) on the token
and request counters and the TTFT, ITL and E2E histograms.

Fed from the engine: the gauges are its state at scrape time (SGLang sets them at each log
interval); TTFT and ITL are observed per token by the engine (`Engine.ttft`/`Engine.itl`, one
token per step per sequence, so SGLang's interval / new tokens is the step's interval); the token
and request counters are added when a request finishes, as `observe_one_finished_request` does;
a request the engine dropped before its end (a client gone) counts in `num_aborted_requests_total`
as the tokenizer manager's `abort_request` counts it.
Not served: `cache_hit_rate` (the last prefill batch's ratio, zeroed on decode logs), the
`num_retracted_reqs` gauge (retractions since the last log) and the PD, grammar, spec and
LoRA families, which the simulator has nothing to feed.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.metrics import FastHistogram

# fmt: off
TTFT_BUCKETS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS: tuple[float, ...] = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
E2E_BUCKETS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
QUEUE_BUCKETS: tuple[float, ...] = (
    0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400,
    500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
# fmt: on
SCHEDULER_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
TOKENIZER_LABELS = ("model_name",)


class SglangMetrics:
    """SGLang's scheduler and tokenizer collectors over the simulator's engine (one served model)."""

    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self.scheduler = [model, "unified", "0", "0", "0"]
        self.tokenizer = [model]
        self.ttft = FastHistogram(TTFT_BUCKETS)
        self.itl = FastHistogram(ITL_BUCKETS)
        self.e2e = FastHistogram(E2E_BUCKETS)
        self.queue = FastHistogram(QUEUE_BUCKETS)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.requests = 0
        engine.ttft = self.ttft
        engine.itl = self.itl
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def counters(self, model: str) -> None:
        """No per-model tally: SGLang adds its token counters when a request finishes."""
        return None

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        self.prompt_tokens += seq.prompt_tokens
        self.generation_tokens += seq.generated
        self.cached_tokens += seq.cached_tokens
        self.requests += 1
        last, sched = seq.last_token_time, seq.scheduled_time
        if last is not None:
            self.e2e.observe((seq.finish_time or last) - seq.arrival_time)
        if sched is not None:
            self.queue.observe(sched - seq.arrival_time)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # prometheus_client collector protocol
    def collect(self) -> Iterator[Metric]:
        eng = self.engine
        pool_tokens = eng.pool.num_blocks * eng.bs
        for name, doc, value in (
            ("sglang:num_running_reqs", "The number of running requests.", len(eng.running)),
            ("sglang:num_used_tokens", "The number of used tokens.", eng.pool.used * eng.bs),
            ("sglang:token_usage", "The token usage.", eng.kv_cache_usage),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", len(eng.waiting)),
            (
                "sglang:num_grammar_queue_reqs",
                "The number of requests in the grammar waiting queue.",
                0,  # the simulator compiles no grammar: nothing ever waits for one
            ),
            (
                "sglang:max_total_num_tokens",
                "Maximum total number of tokens in the KV cache pool.",
                pool_tokens,
            ),
        ):
            g = GaugeMetricFamily(name, doc, labels=SCHEDULER_LABELS)
            g.add_metric(self.scheduler, value)
            yield g
        retracted = CounterMetricFamily(
            "sglang:num_retracted_requests", "Total number of retracted requests.", labels=SCHEDULER_LABELS
        )
        retracted.add_metric(self.scheduler, eng.counters.preemptions)
        yield retracted
        yield self._histogram(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", self.queue, True
        )
        for name, doc, value in (
            ("sglang:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
            ("sglang:generation_tokens", "Number of generation tokens processed.", self.generation_tokens),
            ("sglang:cached_tokens", "Number of cached prompt tokens.", self.cached_tokens),
            ("sglang:num_requests", "Number of requests processed.", self.requests),
            # the tokenizer manager's abort_request (a client gone) observes one aborted request
            ("sglang:num_aborted_requests", "Number of requests aborted.", eng.counters.aborted),
        ):
            c = CounterMetricFamily(name, doc, labels=TOKENIZER_LABELS)
            c.add_metric(self.tokenizer, value)
            yield c
        yield self._histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.ttft
        )
        yield self._histogram(
            "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.itl
        )
        yield self._histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            self.e2e,
        )

    def _histogram(
        self, name: str, doc: str, hist: FastHistogram, scheduler: bool = False
    ) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=SCHEDULER_LABELS if scheduler else TOKENIZER_LABELS)
        hist.add_to(fam, self.scheduler if scheduler else self.tokenizer)
        return fam
