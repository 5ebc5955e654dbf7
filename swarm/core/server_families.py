"""Which server family a /metrics scrape comes from, and each family's names for the swarm's fields.

The facts (names, types, labels, versions) are docs/server-families.md's, read from each project's
source at a pinned commit; this module is their table. One `Family` per engine:

- `vllm`: vLLM 0.10 to 0.33 (new names first: `kv_cache_usage_perc`, `prefix_cache_*`,
  `inter_token_latency_seconds`; 0.10/0.11 expose the old ones beside them and the new one wins).
  OpenLLM bentos that export vLLM's names read as `vllm` too.
- `llamacpp`: `llama-server --metrics`; its `prompt_tokens_total` leaves out the prompt tokens
  reused from the prompt cache (`prompt_tokens_cached_total`, `Family.cached`): the parser adds
  them back.
- `sglang`: `--enable-metrics`. Retractions are `num_retracted_requests_total` (the old
  `num_retracted_reqs` is a gauge reset after every log: never summed); prefix hits are
  `cached_tokens_total` over `prompt_tokens_total` (`cache_hit_rate` is the last prefill batch's,
  zeroed on decode logs: not read). No spec-decoding counters (only averaged gauges): absent.
  The scheduler's series carry `tp_rank`, `pp_rank`, `moe_ep_rank` (`rank_labels`): with
  `--enable-metrics-for-all-schedulers` every rank reports the same batch, so only the lowest rank's
  series is read (summing would count one batch once per rank); `dp_rank` series are separate
  schedulers and are summed, as vLLM's `engine` series (`token_usage` averaged).
- `tgi`: no labels on the request metrics, one model. `running` is `tgi_batch_current_size`,
  `waiting` `tgi_queue_size`. `kv_usage` is a proxy (`ratios`): the share of the batch token budget
  the running batch reserves, `tgi_batch_current_max_tokens / tgi_batch_max_total_tokens`; the
  budget is what TGI admits requests against, but it is a reservation, not KV blocks in use (the
  diagnosis says "batch token budget", not "KV-cache usage"). Token counts are the `_sum` of the
  histograms `tgi_request_input_length` (recorded at validation: requests that fail later count
  too) and `tgi_request_generated_tokens` (successful requests only). No TTFT histogram, no ITL
  (`tgi_request_mean_time_per_token_duration` is one mean per request, prefill included), no
  preemption, prefix-cache or spec-decoding counter: absent.
- `trtllm`: `trtllm-serve` with `return_perf_metrics`, served at `/prometheus/metrics`
  (`metrics_path`; its `/metrics` is a JSON list of iteration stats). The current collector's names
  are `trtllm_*`, NVIDIA Dynamo re-exports them as `trtllm:*`, and the older collector wrote five
  of them without a prefix (success, E2E, TTFT, TPOT, queue time): all three are read. Its labels
  `model_name` / `engine_type` are the literal "undefined". No preemption counter, no count of
  drafts (only draft and accepted tokens): absent.

`detect(names)` picks the family from the metric names (`families_in(names)`: all of them, more than
one in a scrape no single engine wrote); `FAMILIES[name]` is the override. The
analysis reads scrapes by these names, and the every-family Grafana dashboard
(swarm/grafana/dashboards.py) generates its queries from them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

FAMILY_NAMES = ("vllm", "llamacpp", "sglang", "tgi", "trtllm")
"""Families whose /metrics the swarm reads (`unknown`: none of their names in a scrape)."""
GAUGE_FIELDS = ("running", "waiting", "kv_usage")
COUNTER_FIELDS = (
    "prompt_tokens",
    "generation_tokens",
    "preemptions",
    "prefix_queries",
    "prefix_hits",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted",
    "aborts",
)
HISTOGRAM_FIELDS = ("ttft", "itl", "e2e", "queue", "prefill", "decode")
NO_REASON = "finished"  # request_success's key where the family's counter has no finished_reason label


@dataclass(frozen=True)
class Family:
    """One engine's names for the swarm's fields: field -> sample names, preferred first (the first
    one present in a scrape wins). A field missing from every table is absent for the family."""

    name: str
    title: str  # as prose says it: "vLLM", "SGLang"
    prefixes: tuple[str, ...]  # a scrape with a name starting so is this family's
    gauges: dict[str, tuple[str, ...]] = field(default_factory=dict)
    counters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    histograms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # base names (+ _bucket...)
    ratios: dict[str, tuple[str, str]] = field(default_factory=dict)  # field -> (numerator, denominator)
    success: tuple[str, ...] = ()  # the finished-requests counter
    reason_label: str | None = None  # its finished_reason label, where it has one
    cached: str | None = None  # prompt tokens reused from the cache, not in prompt_tokens (llama.cpp)
    rank_labels: tuple[str, ...] = ()  # one scheduler's series per rank: only the lowest rank is read
    metrics_path: str = "/metrics"
    cap_knob: str = "the scheduler's cap on running requests"
    kv_advice: str = "give the KV cache more memory or shorten the longest request"
    kv_what: str = "KV-cache usage"
    preempt_word: str = "preemptions"

    def metric(self, fieldname: str) -> str | None:
        """The family's own name for a field (the first candidate), for prose; None: absent."""
        if fieldname in self.ratios:
            num, den = self.ratios[fieldname]
            return f"{num} / {den}"
        for table in (self.gauges, self.counters, self.histograms):
            if fieldname in table:
                return table[fieldname][0]
        return None

    def has(self, fieldname: str) -> bool:
        return self.metric(fieldname) is not None

    def lacks(self, fieldname: str) -> bool:
        """The family is known and has no such figure (`unknown` claims nothing either way)."""
        return self.name != "unknown" and not self.has(fieldname)

    def named(self, fieldname: str) -> str:
        """ "; NAME" for a sentence's parenthesis quoting the family's own metric ("" where it has none)."""
        name = self.metric(fieldname)
        return "" if name is None else f"; {name}"


def _trtllm(base: str, bare: bool = False) -> tuple[str, ...]:
    """TensorRT-LLM's name in its three spellings: current, Dynamo's, and the older collector's."""
    return (f"trtllm_{base}", f"trtllm:{base}", *((base,) if bare else ()))


VLLM = Family(
    "vllm",
    "vLLM",
    ("vllm:",),
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    counters={
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "preemptions": ("vllm:num_preemptions_total",),
        "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
    },
    histograms={
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "queue": ("vllm:request_queue_time_seconds",),
        "prefill": ("vllm:request_prefill_time_seconds",),
        "decode": ("vllm:request_decode_time_seconds",),
    },
    success=("vllm:request_success_total",),
    reason_label="finished_reason",
    cap_knob="the scheduler's --max-num-seqs cap",
    kv_advice="shorten --max-model-len or quantise the KV cache (--kv-cache-dtype fp8)",
)
LLAMACPP = Family(
    "llamacpp",
    "llama.cpp",
    ("llamacpp:",),
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_usage": ("llamacpp:kv_cache_usage_ratio",),
    },
    counters={
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        # llama.cpp (b11434) exposes vLLM's three spec-decoding counters under its own prefix
        "spec_drafts": ("llamacpp:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_accepted": ("llamacpp:spec_decode_num_accepted_tokens_total",),
    },
    cached="llamacpp:prompt_tokens_cached_total",
    cap_knob="the --parallel slot count",
    kv_advice="shorten --max-model-len or quantise the KV cache (--kv-cache-dtype fp8)",
)
SGLANG = Family(
    "sglang",
    "SGLang",
    ("sglang:",),
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_usage": ("sglang:token_usage",),
    },
    counters={
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "preemptions": ("sglang:num_retracted_requests_total",),
        "prefix_queries": ("sglang:prompt_tokens_total",),
        "prefix_hits": ("sglang:cached_tokens_total",),
        "aborts": ("sglang:num_aborted_requests_total",),  # (a client's hang-up included)
    },
    histograms={
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds",),
        "e2e": ("sglang:e2e_request_latency_seconds",),
        "queue": ("sglang:queue_time_seconds",),
    },
    success=("sglang:num_requests_total",),
    rank_labels=("tp_rank", "pp_rank", "moe_ep_rank"),
    cap_knob="the scheduler's --max-running-requests cap",
    kv_advice="lower --context-length, raise --mem-fraction-static or quantise the KV cache "
    "(--kv-cache-dtype fp8_e5m2)",
    kv_what="KV token usage",
    preempt_word="retractions",
)
TGI = Family(
    "tgi",
    "TGI",
    ("tgi_",),
    gauges={"running": ("tgi_batch_current_size",), "waiting": ("tgi_queue_size",)},
    ratios={"kv_usage": ("tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens")},
    counters={
        "prompt_tokens": ("tgi_request_input_length_sum",),
        "generation_tokens": ("tgi_request_generated_tokens_sum",),
    },
    histograms={"e2e": ("tgi_request_duration",), "queue": ("tgi_request_queue_duration",)},
    # metrics-exporter-prometheus 0.15 keeps a counter's registered name; a later one adds _total
    success=("tgi_request_success", "tgi_request_success_total"),
    cap_knob="the router's --max-batch-size cap",
    kv_advice="lower --max-total-tokens (each request's reservation) or give the KV cache more memory "
    "(--cuda-memory-fraction)",
    kv_what="batch token budget reserved",
)
TRTLLM = Family(
    "trtllm",
    "TensorRT-LLM",
    ("trtllm_", "trtllm:"),
    gauges={
        "running": _trtllm("num_requests_running"),
        "waiting": _trtllm("num_requests_waiting"),
        "kv_usage": _trtllm("kv_cache_utilization"),
    },
    counters={
        "prompt_tokens": _trtllm("prompt_tokens_total"),
        "generation_tokens": _trtllm("generation_tokens_total"),
        "prefix_queries": _trtllm("prompt_tokens_total"),
        "prefix_hits": _trtllm("prompt_cached_tokens_total"),
        "spec_draft_tokens": _trtllm("spec_decode_num_draft_tokens_total"),
        "spec_accepted": _trtllm("spec_decode_num_accepted_tokens_total"),
    },
    histograms={
        "ttft": _trtllm("time_to_first_token_seconds", bare=True),
        "itl": _trtllm("time_per_output_token_seconds", bare=True),
        "e2e": _trtllm("e2e_request_latency_seconds", bare=True),
        "queue": _trtllm("request_queue_time_seconds", bare=True),
        "prefill": _trtllm("request_prefill_time_seconds"),
        "decode": _trtllm("request_decode_time_seconds"),
    },
    success=_trtllm("request_success_total", bare=True),
    reason_label="finished_reason",
    metrics_path="/prometheus/metrics",
    cap_knob="the --max_batch_size cap",
    kv_advice="raise --kv_cache_free_gpu_memory_fraction or lower --max_seq_len",
)
UNKNOWN = Family("unknown", "the server", ())
FAMILIES: dict[str, Family] = {f.name: f for f in (VLLM, LLAMACPP, SGLANG, TGI, TRTLLM)}
TRTLLM_OLD = ("time_to_first_token_seconds_bucket", "request_success_total")
"""The older TensorRT-LLM collector's unprefixed names: both present, and no prefixed family, is it."""


def family(name: str | None) -> Family:
    """The family called `name` (`unknown`, `none` or None: the generic one)."""
    return FAMILIES.get(name or "", UNKNOWN)


def detect(names: Collection[str]) -> str:
    """The family of a scrape from its sample names: the first whose prefix some name has (vLLM
    first: a proxy that adds its own names keeps the engine's), else the older unprefixed
    TensorRT-LLM collector, else `unknown`."""
    for fam in FAMILIES.values():
        if any(n.startswith(fam.prefixes) for n in names):
            return fam.name
    if all(n in names for n in TRTLLM_OLD):
        return "trtllm"
    return "unknown"


def families_in(names: Collection[str]) -> tuple[str, ...]:
    """Every family some name of a scrape belongs to (by prefix), in `detect`'s order: more than
    one is a /metrics no single engine wrote (two exporters merged, or a forgery), which `detect`
    reads as the first."""
    return tuple(fam.name for fam in FAMILIES.values() if any(n.startswith(fam.prefixes) for n in names))
