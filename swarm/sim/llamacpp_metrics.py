"""llama-server's /metrics (`swarm sim --server llamacpp`): the `llamacpp:` families
`llama-server --metrics` exposes, no histograms."""

from __future__ import annotations

from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence


class LlamaMetrics:
    """`llama-server --metrics`: its `llamacpp:` counters and gauges from the engine's state,
    written as llama-server writes them (HELP, TYPE, one unlabelled sample; names as given)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prompt_seconds = 0.0
        self.predicted_seconds = 0.0
        self.n_tokens_max = 0

    def counters(self, model: str) -> None:
        """No per-model tally: llama-server serves one model."""
        return None

    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None:
        sched, first, last = seq.scheduled_time, seq.first_token_time, seq.last_token_time
        if sched is not None and first is not None and last is not None:
            self.prompt_seconds += first - sched
            self.predicted_seconds += last - first
        self.n_tokens_max = max(self.n_tokens_max, seq.prompt_tokens + seq.generated)

    def families(self) -> list[tuple[str, str, str, float]]:
        """(name, type, help, value) in llama-server's order."""
        eng = self.engine
        c = eng.counters
        processed = c.prompt_tokens - c.prompt_cached
        return [
            (
                "prompt_tokens_total",
                "counter",
                "Number of prompt tokens processed, excluding cached tokens",
                processed,
            ),
            (
                "prompt_tokens_cached_total",
                "counter",
                "Number of prompt tokens reused from the cache",
                c.prompt_cached,
            ),
            ("prompt_seconds_total", "counter", "Total time spent processing prompts", self.prompt_seconds),
            (
                "tokens_predicted_total",
                "counter",
                "Number of generation tokens processed",
                c.generation_tokens,
            ),
            (
                "tokens_predicted_seconds_total",
                "counter",
                "Total time spent generating tokens",
                self.predicted_seconds,
            ),
            (
                "n_decode_total",
                "counter",
                "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
                c.steps,
            ),
            (
                "n_tokens_max",
                "counter",
                "Largest observed sequence length (prompt + generation)",
                self.n_tokens_max,
            ),
            ("spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated", 0),
            (
                "spec_decode_num_accepted_tokens_total",
                "counter",
                "Speculative: Total draft tokens accepted by the target model",
                0,
            ),
            (
                "spec_decode_num_drafts_total",
                "counter",
                "Speculative: Total speculative decoding verification steps",
                0,
            ),
            (
                "prompt_tokens_seconds",
                "gauge",
                "Average prompt throughput in tokens/s",
                processed / self.prompt_seconds if self.prompt_seconds else 0.0,
            ),
            (
                "predicted_tokens_seconds",
                "gauge",
                "Average generation throughput in tokens/s",
                c.generation_tokens / self.predicted_seconds if self.predicted_seconds else 0.0,
            ),
            ("requests_processing", "gauge", "Number of requests processing", len(eng.running)),
            ("requests_deferred", "gauge", "Number of requests deferred", len(eng.waiting)),
            (
                "n_busy_slots_per_decode",
                "gauge",
                "Average number of busy slots per llama_decode() call",
                c.step_seqs / c.steps if c.steps else 0.0,
            ),
        ]

    def render(self) -> bytes:
        lines = []
        for name, kind, doc, value in self.families():
            full = f"llamacpp:{name}"
            lines += [f"# HELP {full} {doc}", f"# TYPE {full} {kind}", f"{full} {value:g}"]
        return ("\n".join(lines) + "\n").encode()
