"""TGI's /metrics (`swarm sim --server tgi`): the `tgi_` families text-generation-inference
v3.3.7 writes (huggingface/text-generation-inference at db931fcf: `router/src/server.rs`,
`validation.rs`, `backends/v3/src/{backend.rs,queue.rs,lib.rs}`; docs/server-families.md),
rendered as metrics-exporter-prometheus 0.15 renders them: HELP from `server.rs`'s
`describe_*` (the last one given for a name), counters under their own names (no `_total`),
histograms with the buckets `server.rs` sets (35 geometric from 0.00015 s for every
`*duration`, 100 linear up to the token limits for the lengths).

No `model_name` label (one TGI serves one model); `err` on `tgi_request_failure`. TGI has no TTFT
histogram, no token counters (only the length histograms' sums), no prefix cache and no KV usage:
neither has this face. Fed from the engine: the queue and batch gauges are its state at scrape
time, the batch's tokens each running request's reservation at its limit (`reservation`). The
engine admits as vLLM does, on the blocks requests hold, not as TGI's queue does, on their
reservations against `tgi_batch_max_total_tokens`: with requests that stop before their limit the
face can run more of them than TGI would, and its reserved share then exceeds 1 where TGI's stays
at or under it. A request is counted when it arrives (`tgi_request_count`, its input length at
validation) and its durations and generated tokens when it succeeds, as `server.rs` records them.
The per-batch `method` families (forward, decode, filter durations) are not served: the engine has
no per-batch hook.
"""

from __future__ import annotations

from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.metrics import FastHistogram

DEFAULT_GENERATION_LENGTH = 1024  # router/src/validation.rs: max_new_tokens is allocated in chunks of it
FAILURE_KINDS = ("overloaded", "validation", "template", "incomplete", "dropped", "generation")


def duration_buckets() -> tuple[float, ...]:
    """`server.rs`: 35 buckets, 0.0001 x 1.5^k for k = 1..35."""
    out, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        out.append(value)
    return tuple(out)


def linear_buckets(limit: int) -> tuple[float, ...]:
    """`server.rs`: 100 buckets, limit / 100 x (k + 1)."""
    return tuple(limit / 100.0 * (k + 1) for k in range(100))


def reservation(seq: EngineSequence, block_size: int) -> int:
    """The tokens TGI's running batch holds for one request (`tgi_batch_current_max_tokens` is their
    sum): `backends/v3/src/backend.rs` sets the gauge to the batch's `max_tokens`, which
    `flash_causal_lm.py` reports as its blocks x BLOCK_SIZE; `queue.rs` allocates a request's blocks
    when it is admitted, for input + max_new_tokens - 1 tokens, max_new_tokens being the request's
    limit cut to DEFAULT_GENERATION_LENGTH (`router/src/validation.rs`). A reservation at the
    request's limit: a request that stops early at EOS still holds it."""
    tokens = seq.prompt_tokens + min(seq.max_tokens, DEFAULT_GENERATION_LENGTH) - 1
    return -(-tokens // block_size) * block_size


def _number(v: float) -> str:
    """A value as Rust's f64 Display writes it: integers bare, others the shortest round trip."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class TgiMetrics:
    """TGI's router and v3 backend metrics over the simulator's engine."""

    def __init__(self, engine: Engine, max_total_tokens: int) -> None:
        self.engine = engine
        durations = duration_buckets()
        self.hist = {
            "tgi_request_duration": FastHistogram(durations),
            "tgi_request_validation_duration": FastHistogram(durations),
            "tgi_request_queue_duration": FastHistogram(durations),
            "tgi_request_inference_duration": FastHistogram(durations),
            "tgi_request_mean_time_per_token_duration": FastHistogram(durations),
            "tgi_request_input_length": FastHistogram(linear_buckets(max_total_tokens - 1)),
            "tgi_request_generated_tokens": FastHistogram(linear_buckets(max_total_tokens)),
        }
        self.requests = 0
        self.successes = 0
        self.failures = dict.fromkeys(FAILURE_KINDS, 0)

    def counters(self, model: str) -> None:
        """No per-model tally: TGI serves one model."""
        return None

    def arrived(self, prompt_tokens: int | None) -> None:
        """A generation request reached the router (`tgi_request_count`); its input length is
        recorded at validation, so only for a request that parsed (None: it did not)."""
        self.requests += 1
        if prompt_tokens is not None:
            self.hist["tgi_request_input_length"].observe(prompt_tokens)

    def failed(self, kind: str) -> None:
        self.failures[kind] += 1

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        self.successes += 1
        self.hist["tgi_request_generated_tokens"].observe(seq.generated)
        sched, last = seq.scheduled_time, seq.last_token_time
        if sched is None or last is None:
            return
        h, end = self.hist, seq.finish_time or last
        h["tgi_request_duration"].observe(end - seq.arrival_time)
        h["tgi_request_validation_duration"].observe(0.0)  # the simulator validates in no measurable time
        h["tgi_request_queue_duration"].observe(sched - seq.arrival_time)
        h["tgi_request_inference_duration"].observe(end - sched)
        if seq.generated:  # server.rs: inference time / generated tokens, prefill included
            h["tgi_request_mean_time_per_token_duration"].observe((end - sched) / seq.generated)

    def families(self) -> list[tuple[str, str, str, list[tuple[str, float]]]]:
        """(name, type, HELP, [(labels, value)]) of the counters and gauges, exporter order."""
        eng = self.engine
        reserved = sum(reservation(s, eng.bs) for s in eng.running)
        failures = [(f'{{err="{k}"}}', n) for k, n in self.failures.items() if n]
        return [
            ("tgi_request_count", "counter", "Total number of requests", [("", self.requests)]),
            ("tgi_request_failure", "counter", "", failures),
            ("tgi_request_success", "counter", "Number of successful requests", [("", self.successes)]),
            (
                "tgi_batch_current_max_tokens",
                "gauge",
                "Maximum tokens for the current batch",
                [("", reserved)],
            ),
            ("tgi_batch_current_size", "gauge", "Current batch size", [("", len(eng.running))]),
            ("tgi_batch_max_total_tokens", "gauge", "", [("", eng.pool.num_blocks * eng.bs)]),
            ("tgi_queue_size", "gauge", "Current queue size", [("", len(eng.waiting))]),
        ]

    def render(self) -> bytes:
        lines: list[str] = []
        for name, kind, doc, samples in self.families():
            if not samples:
                continue  # a labelled counter appears with its first increment
            if doc:
                lines.append(f"# HELP {name} {doc}")
            lines.append(f"# TYPE {name} {kind}")
            lines += [f"{name}{labels} {_number(v)}" for labels, v in samples]
            lines.append("")
        for name, hist in self.hist.items():
            lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} histogram"]
            cum = 0
            for bound, count in zip(hist.bounds, hist.counts, strict=False):
                cum += count
                lines.append(f'{name}_bucket{{le="{_number(bound)}"}} {cum}')
            lines.append(f'{name}_bucket{{le="+Inf"}} {hist.count}')
            lines += [f"{name}_sum {_number(hist.sum)}", f"{name}_count {hist.count}", ""]
        return "\n".join(lines).encode()


_HELP = {  # server.rs's describe_histogram! texts, the later one where a name is described twice
    "tgi_request_duration": "Total time spent processing the request",
    "tgi_request_validation_duration": "Time spent validating the request",
    "tgi_request_queue_duration": "Time spent in the queue per request",
    "tgi_request_inference_duration": "Request inference duration",
    "tgi_request_mean_time_per_token_duration": "Mean time per token per request",
    "tgi_request_input_length": "Input token length per request",
    "tgi_request_generated_tokens": "Generated tokens per request",
}
