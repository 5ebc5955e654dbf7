"""/metrics texts of SGLang, TGI and TensorRT-LLM, written as each project's exporter writes them, with
the names, types and labels of docs/server-families.md (read from each project's source):

- SGLang: prometheus_client (multiprocess mode), `# HELP`/`# TYPE`, scheduler gauges labelled
  `engine_type`, `model_name`, `moe_ep_rank`, `pp_rank`, `tp_rank` (`dp_rank` with data
  parallelism), tokenizer counters and histograms labelled `model_name`; counters end `_total`.
- TGI: metrics-exporter-prometheus 0.15: `# TYPE` lines only, no labels on the request metrics,
  counters under their registered names (no `_total`), `method` on the batch metrics, `err` on
  `tgi_request_failure`.
- TensorRT-LLM: prometheus_client, `trtllm_` names labelled `model_name="undefined"`,
  `engine_type="undefined"`; `finished_reason` on the success counter.

Each builder takes the figures the test checks, so the parsed fields are checked against the
numbers written here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

SCHED = '{dp}engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="{tp}"'
SGLANG_TTFT_LE = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
    200.0,
    400.0,
)


def _le(b: float) -> str:
    return "+Inf" if b == float("inf") else f"{b}"


def histogram(
    name: str,
    labels: str,
    bounds: Sequence[float],
    counts: Sequence[float],
    total: float,
    help_text: str | None = "",
) -> str:
    """A histogram family as prometheus_client writes it: cumulative buckets, +Inf, _sum, _count."""
    sep = "," if labels else ""
    lines = [f"# HELP {name} {help_text or name}"] if help_text is not None else []
    lines.append(f"# TYPE {name} histogram")
    for b, c in zip((*bounds, float("inf")), counts, strict=True):
        lines.append(f'{name}_bucket{{{labels}{sep}le="{_le(b)}"}} {c}')
    lines.append(f"{name}_sum{{{labels}}} {total}" if labels else f"{name}_sum {total}")
    lines.append(f"{name}_count{{{labels}}} {counts[-1]}" if labels else f"{name}_count {counts[-1]}")
    return "\n".join(lines)


def sglang(
    running: float | Sequence[float],
    queue: float | Sequence[float],
    usage: float | Sequence[float],
    *,
    prompt: float = 0,
    generation: float = 0,
    cached: float = 0,
    retracted: float = 0,
    requests: float = 0,
    ttft_counts: Sequence[float] | None = None,
    ttft_sum: float = 0.0,
    model: str = "qwen",
    tp_ranks: int = 1,
) -> str:
    """One SGLang scrape; `tp_ranks` > 1: `--enable-metrics-for-all-schedulers`, every TP rank
    reporting the same batch. A sequence of gauge values: one scheduler per data-parallel rank
    (`dp_rank` label), the retractions counted on the first."""
    out = []
    per_dp = [v if isinstance(v, Sequence) else [v] for v in (running, queue, usage)]
    ranks = len(per_dp[0])
    for name, kind, values in (
        ("sglang:num_running_reqs", "gauge", per_dp[0]),
        ("sglang:num_queue_reqs", "gauge", per_dp[1]),
        ("sglang:token_usage", "gauge", per_dp[2]),
        (
            "sglang:num_retracted_reqs",
            "gauge",
            [0.0] * ranks,
        ),  # the old gauge, reset after each log: not read
        ("sglang:cache_hit_rate", "gauge", [0.0] * ranks),  # zeroed on decode logs: not read
        ("sglang:num_retracted_requests_total", "counter", [retracted] + [0.0] * (ranks - 1)),
    ):
        base = name.removesuffix("_total")
        out += [f"# HELP {base} {base}", f"# TYPE {base} {kind}"]
        for dp, value in enumerate(values):
            dp_label = f'dp_rank="{dp}",' if ranks > 1 else ""
            for tp in range(tp_ranks):
                out.append(f"{name}{{{SCHED.format(dp=dp_label, model=model, tp=tp)}}} {value}")
    for name, value in (
        ("sglang:prompt_tokens_total", prompt),
        ("sglang:generation_tokens_total", generation),
        ("sglang:cached_tokens_total", cached),
        ("sglang:num_requests_total", requests),
    ):
        base = name.removesuffix("_total")
        out += [f"# HELP {base} {base}", f"# TYPE {base} counter", f'{name}{{model_name="{model}"}} {value}']
    counts = ttft_counts if ttft_counts is not None else [0.0] * (len(SGLANG_TTFT_LE) + 1)
    out.append(
        histogram(
            "sglang:time_to_first_token_seconds", f'model_name="{model}"', SGLANG_TTFT_LE, counts, ttft_sum
        )
    )
    return "\n".join(out) + "\n"


TGI_DURATION_LE = tuple(0.00015 * 1.5**i for i in range(35))  # server.rs: every *_duration histogram


def tgi(
    batch: float,
    queue: float,
    reserved: float,
    budget: float = 50_000,
    *,
    success: float = 0,
    input_sum: float = 0,
    generated_sum: float = 0,
    requests: float = 0,
    e2e: Mapping[str, object] | None = None,
) -> str:
    """One TGI scrape. `e2e`: {"counts": cumulative over TGI_DURATION_LE + +Inf, "sum": s}."""
    lines = [
        "# TYPE tgi_queue_size gauge",
        f"tgi_queue_size {queue}",
        "# TYPE tgi_batch_current_size gauge",
        f"tgi_batch_current_size {batch}",
        "# TYPE tgi_batch_current_max_tokens gauge",
        f"tgi_batch_current_max_tokens {reserved}",
        "# TYPE tgi_batch_max_total_tokens gauge",
        f"tgi_batch_max_total_tokens {budget}",
        "# TYPE tgi_request_count counter",
        f"tgi_request_count {requests}",
        "# TYPE tgi_request_success counter",
        f"tgi_request_success {success}",
        "# TYPE tgi_request_failure counter",
        'tgi_request_failure{err="validation"} 0',
    ]
    n = requests or 1.0
    lines.append(histogram("tgi_request_input_length", "", (100.0, 1000.0), (0.0, n, n), input_sum, None))
    lines.append(
        histogram("tgi_request_generated_tokens", "", (100.0, 1000.0), (0.0, n, n), generated_sum, None)
    )
    e = e2e or {"counts": [0.0] * (len(TGI_DURATION_LE) + 1), "sum": 0.0}
    lines.append(histogram("tgi_request_duration", "", TGI_DURATION_LE, e["counts"], e["sum"], None))
    lines.append(
        histogram("tgi_batch_forward_duration", 'method="decode"', TGI_DURATION_LE, [1.0] * 36, 0.01, None)
    )
    return "\n".join(lines) + "\n"


TRT_LABELS = 'engine_type="undefined",model_name="undefined"'
VLLM_TTFT_LE = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def trtllm(prefix: str = "trtllm_", *, running: float = 3, waiting: float = 1, kv: float = 0.42) -> str:
    """One TensorRT-LLM scrape: `prefix` "trtllm_" (current collector), "trtllm:" (Dynamo), ""
    (the older collector: its five metrics only, no gauges or token counters)."""
    out = []
    if prefix:
        for name, value in (
            ("num_requests_running", running),
            ("num_requests_waiting", waiting),
            ("kv_cache_utilization", kv),
        ):
            out += [
                f"# HELP {prefix}{name} {name}",
                f"# TYPE {prefix}{name} gauge",
                f"{prefix}{name}{{{TRT_LABELS}}} {value}",
            ]
        for name, value in (
            ("prompt_tokens", 5000.0),
            ("generation_tokens", 700.0),
            ("prompt_cached_tokens", 1200.0),
            ("spec_decode_num_draft_tokens", 90.0),
            ("spec_decode_num_accepted_tokens", 60.0),
        ):
            out += [
                f"# HELP {prefix}{name}_total {name}",
                f"# TYPE {prefix}{name} counter",
                f"{prefix}{name}_total{{{TRT_LABELS}}} {value}",
            ]
    out += [
        f"# HELP {prefix}request_success_total Count of successfully processed requests.",
        f"# TYPE {prefix}request_success counter",
        f'{prefix}request_success_total{{{TRT_LABELS},finished_reason="stop"}} 9.0',
        f'{prefix}request_success_total{{{TRT_LABELS},finished_reason="length"}} 1.0',
    ]
    cum = [0, 0, 0, 0, 1, 3, 6, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10]
    out.append(histogram(f"{prefix}time_to_first_token_seconds", TRT_LABELS, VLLM_TTFT_LE, cum, 0.55))
    for name in (
        "time_per_output_token_seconds",
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
    ):
        out.append(histogram(f"{prefix}{name}", TRT_LABELS, (0.1, 1.0), (2, 10, 10), 3.0))
    return "\n".join(out) + "\n"


def vllm(
    running: float | str,
    waiting: float | str,
    kv: float | str,
    *,
    success: float | str = 0,
    generation: float | str = 0,
    ttft_counts: Sequence[float | str] | None = None,
    ttft_sum: float | str = 0.0,
    model: str = "qwen",
) -> str:
    """One vLLM scrape (prometheus_client's layout, `model_name` on every series); a figure given as
    text ("+Inf", "NaN") is written as it is."""
    labels = f'model_name="{model}"'
    out = []
    for name, kind, value in (
        ("vllm:num_requests_running", "gauge", running),
        ("vllm:num_requests_waiting", "gauge", waiting),
        ("vllm:kv_cache_usage_perc", "gauge", kv),
        ("vllm:generation_tokens_total", "counter", generation),
    ):
        out += [f"# HELP {name} {name}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {value}"]
    out += [
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{labels},finished_reason="stop"}} {success}',
    ]
    counts = ttft_counts if ttft_counts is not None else [0.0] * (len(VLLM_TTFT_LE) + 1)
    out.append(histogram("vllm:time_to_first_token_seconds", labels, VLLM_TTFT_LE, counts, ttft_sum))
    return "\n".join(out) + "\n"
