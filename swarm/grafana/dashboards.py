"""Grafana dashboards as code: five dashboards built with Grafana's own grafana-foundation-sdk.

`swarm dashboards build` writes them to `dashboards/grafana/dashboards/*.json` (checked in,
provisioned by docker-compose); tests/unit/grafana/test_dashboards.py fails when those files are
stale, and tests/integration/test_promql.py runs every panel's query against a real Prometheus
scraping a real run.

- "LLM load test" (client side, `swarm_*` from the master's /metrics);
- "vLLM server" (`vllm:*`, current names with a PromQL `or` fallback to the pre-0.12 names), and a
  row of the GPUs behind it (NVIDIA dcgm-exporter's `DCGM_FI_*`, the `dcgm` scrape job);
- "Client vs server" (the two measured side by side, with ratios and gaps);
- "llama.cpp server" (`llamacpp:*` of `llama-server --metrics`: slots, token rates, prompt cache);
- "LLM server (every family)": the same server figures from each engine's own names (vLLM,
  llama.cpp, SGLang, TGI, TensorRT-LLM), one series per family, joined in the query (`by_family`;
  why joined queries and not recording rules or a dashboard per family: `llm_server`'s docstring).

Every selector uses regex matchers (`=~"$var"`) so the "All" value (`.*`) and multi-value
selections work; every rate uses `$__rate_interval`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import common as gcommon
from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus as gprom
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as mcommon
from grafana_foundation_sdk.models import dashboard as mdash

from swarm.grafana.names import ANNOTATION_TAG, DATASOURCE_UID

DASHBOARD_DIR = Path("dashboards/grafana/dashboards")

PROM = mdash.DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
GRAFANA = mdash.DataSourceRef(type_val="grafana", uid="-- Grafana --")

# label selectors
CLIENT = 'run_id=~"$run_id", workload=~"$workload", model_name=~"$model_name"'
RUN = 'run_id=~"$run_id"'
SERVER = 'model_name=~"$model_name"'
LLAMA = 'instance=~"$instance"'  # llama-server's metrics carry no labels of their own
RATE_INTERVAL = "$__rate_interval"
TOKS = "suffix: tok/s"


# ----------------------------------------------------------------------------- PromQL helpers


def rate(metric: str, sel: str) -> str:
    return f"rate({metric}{{{sel}}}[{RATE_INTERVAL}])"


def rate_or(metric: str, legacy: str, sel: str) -> str:
    """Current vLLM name, or the pre-0.12 one where only that exists (same labels)."""
    return f"({rate(metric, sel)} or {rate(legacy, sel)})"


def quantile(q: float, metric: str, sel: str, by: str = "", legacy: str | None = None) -> str:
    """histogram_quantile over `metric`_bucket summed by le (and `by`)."""
    inner = rate_or(metric + "_bucket", legacy + "_bucket", sel) if legacy else rate(metric + "_bucket", sel)
    labels = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) ({inner}))"


def mean(metric: str, sel: str) -> str:
    return f"sum({rate(metric + '_sum', sel)}) / sum({rate(metric + '_count', sel)})"


# ----------------------------------------------------------------------------- panel helpers


@dataclass(frozen=True)
class Query:
    """One query of a panel: PromQL and its legend."""

    expr: str
    legend: str = ""


class Layout:
    """Builds one dashboard: panel ids in order (unique, rows included), 24-column grid."""

    def __init__(self, builder: gdash.Dashboard) -> None:
        self.builder = builder
        self.next_id = 1

    def _id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title: str) -> None:
        self.builder.with_row(gdash.Row(title).id(self._id()))

    def _targets(self, panel, queries: list[Query], instant: bool = False):
        for ref, q in zip("ABCDEFGHIJ", queries, strict=False):
            t = gprom.Dataquery().expr(q.expr).ref_id(ref).datasource(PROM)
            if q.legend:
                t = t.legend_format(q.legend)
            panel = panel.with_target(t.instant() if instant else t.range())
        return panel

    def timeseries(
        self,
        title: str,
        description: str,
        queries: list[Query],
        unit: str,
        width: int = 8,
        height: int = 8,
        minimum: float | None = 0,
        stack: bool = False,
    ) -> None:
        p = (
            gts.Panel()
            .id(self._id())
            .title(title)
            .description(description)
            .datasource(PROM)
            .unit(unit)
            .span(width)
            .height(height)
            .line_width(1)
            .fill_opacity(10)
            .legend(
                gcommon.VizLegendOptions()
                .display_mode(mcommon.LegendDisplayMode.LIST)
                .placement(mcommon.LegendPlacement.BOTTOM)
                .show_legend(True)
                .calcs([])
            )
            .tooltip(
                gcommon.VizTooltipOptions()
                .mode(mcommon.TooltipDisplayMode.MULTI)
                .sort(mcommon.SortOrder.DESCENDING)
            )
        )
        if minimum is not None:
            p = p.min(minimum)
        if stack:
            p = p.stacking(gcommon.StackingConfig().mode(mcommon.StackingMode.NORMAL))
        self.builder.with_panel(self._targets(p, queries))

    def stat(
        self,
        title: str,
        description: str,
        queries: list[Query],
        unit: str,
        width: int = 4,
        height: int = 4,
        calc: str = "lastNotNull",
        decimals: int | None = None,
    ) -> None:
        p = (
            gstat.Panel()
            .id(self._id())
            .title(title)
            .description(description)
            .datasource(PROM)
            .unit(unit)
            .span(width)
            .height(height)
            .graph_mode(mcommon.BigValueGraphMode.AREA)
            .color_mode(mcommon.BigValueColorMode.VALUE)
            .text_mode(mcommon.BigValueTextMode.AUTO)
            .reduce_options(gcommon.ReduceDataOptions().calcs([calc]).values(False))
        )
        if decimals is not None:
            p = p.decimals(decimals)
        self.builder.with_panel(self._targets(p, queries))


def label_variable(name: str, label: str, query: str, include_all: bool = True) -> gdash.QueryVariable:
    v = (
        gdash.QueryVariable(name)
        .label(label)
        .datasource(PROM)
        .query(query)  # a plain label_values(...) string: every Grafana version reads it
        .refresh(mdash.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)
        .include_all(include_all)
    )
    if include_all:
        v = v.all_value(".*").current(mdash.VariableOption(selected=True, text="All", value="$__all"))
    else:
        v = v.sort(mdash.VariableSort.ALPHABETICAL_DESC)  # run ids start with a timestamp: newest first
    return v


def base(uid: str, title: str, description: str, tags: list[str]) -> gdash.Dashboard:
    return (
        gdash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["llm-swarm", *tags])
        .refresh("5s")
        .time("now-30m", "now")
        .timezone("browser")
        .editable()
        .tooltip(mdash.DashboardCursorSync.CROSSHAIR)
        .annotation(
            gdash.AnnotationQuery()
            .name("Annotations & Alerts")
            .datasource(GRAFANA)
            .enable(True)
            .hide(True)
            .icon_color("rgba(0, 211, 255, 1)")
            .type("dashboard")
            .target(gdash.AnnotationTarget().type("dashboard").limit(100).match_any(False).tags([]))
        )
        .annotation(
            gdash.AnnotationQuery()
            .name("Swarm runs and stages")
            .datasource(GRAFANA)
            .enable(True)
            .hide(False)
            .icon_color("#FF9830")
            .target(gdash.AnnotationTarget().type("tags").tags([ANNOTATION_TAG]).match_any(True).limit(500))
        )
    )


# ----------------------------------------------------------------------------- dashboards


def llm_load_test() -> gdash.Dashboard:
    d = base(
        "llm-swarm-load-test",
        "LLM load test",
        "Client-side view of a swarm run (master's /metrics): throughput, outcomes, latency "
        "percentiles, token rates, users/workers/stage.",
        ["client"],
    )
    d = (
        d.with_variable(
            label_variable("run_id", "run", "label_values(swarm_requests_total, run_id)", include_all=False)
        )
        .with_variable(
            label_variable("workload", "workload", f"label_values(swarm_requests_total{{{RUN}}}, workload)")
        )
        .with_variable(
            label_variable("model_name", "model", f"label_values(swarm_requests_total{{{RUN}}}, model_name)")
        )
    )
    d = d.annotation(
        gdash.AnnotationQuery()
        .name("Stage changes (from metrics)")
        .datasource(PROM)
        .enable(True)
        .hide(False)
        .icon_color("#B877D9")
        .expr(f"changes(max by (run_id) (swarm_stage{{{RUN}}})[1m:5s]) > 0")
    )
    lay = Layout(d)
    req = "swarm_requests_total"
    failed = CLIENT + ', outcome!~"ok|cancelled"'  # cancelled: cut by the swarm, neither ok nor failed
    ended = CLIENT + ', outcome!="cancelled"'

    lay.row("Overview")
    lay.stat(
        "Requests/s",
        "Finished requests per second, all outcomes.",
        [Query(f"sum({rate(req, CLIENT)})")],
        "reqps",
    )
    lay.stat(
        "Error rate",
        "Share of the requests that ran to an end (ok or failed) that failed; cancelled ones (cut by the "
        "swarm's own stop or ramp-down) are neither, as in summary.json.",
        [Query(f"(sum({rate(req, failed)}) or vector(0)) / sum({rate(req, ended)})")],
        "percentunit",
    )
    lay.stat(
        "TTFT p99",
        "Time to first token (reasoning or answer), 99th percentile.",
        [Query(quantile(0.99, "swarm_ttft_seconds", CLIENT))],
        "s",
    )
    lay.stat(
        "E2E p99",
        "Request latency until [DONE], 99th percentile.",
        [Query(quantile(0.99, "swarm_e2e_seconds", CLIENT))],
        "s",
    )
    lay.stat(
        "Output tok/s",
        "Generated tokens (reasoning + answer) per second.",
        [Query(f"sum({rate('swarm_output_tokens_total', CLIENT)})")],
        TOKS,
    )
    lay.stat(
        "Requests in range",
        "Finished requests in the dashboard's time range.",
        [Query(f"sum(increase({req}{{{CLIENT}}}[$__range]))")],
        "short",
        decimals=0,
    )

    lay.row("Throughput and outcomes")
    lay.timeseries(
        "Requests/s by workload",
        "Finished requests per second, per workload (all outcomes).",
        [Query(f"sum by (workload) ({rate(req, CLIENT)})", "{{workload}}")],
        "reqps",
        width=12,
    )
    lay.timeseries(
        "Outcomes/s",
        "Finished requests per second by outcome (ok, http_error, stream_error, "
        "truncated, timeout, connect_error, bad_chunk).",
        [Query(f"sum by (outcome) ({rate(req, CLIENT)})", "{{outcome}}")],
        "reqps",
        width=12,
        stack=True,
    )

    lay.row("Latency (per workload)")
    for metric, title, what in [
        ("swarm_ttft_seconds", "TTFT", "Time to first token: the first chunk carrying a generated token."),
        ("swarm_ttfa_seconds", "TTFA", "Time to first answer token (after any reasoning)."),
        ("swarm_itl_seconds", "ITL", "Inter-token latency: gaps between token-carrying chunks."),
        ("swarm_tpot_seconds", "TPOT", "Time per output token: (E2E - TTFT) / (output tokens - 1)."),
        ("swarm_e2e_seconds", "E2E", "End-to-end request latency until [DONE]."),
        (
            "swarm_send_lag_seconds",
            "Send lag",
            "Open loop (--rate): how late requests left relative to their arrival schedule; client-side queueing.",
        ),
    ]:
        lay.timeseries(
            f"{title} p50 / p95 / p99",
            what,
            [
                Query(quantile(q, metric, CLIENT, by="workload"), f"p{round(q * 100)} {{{{workload}}}}")
                for q in (0.5, 0.95, 0.99)
            ],
            "s",
            width=12 if title in ("TTFT", "TTFA") else 24 if title == "Send lag" else 8,
        )

    lay.row("Tokens")
    lay.timeseries(
        "Token throughput",
        "Prompt, output (reasoning + answer) and reasoning tokens per second.",
        [
            Query(f"sum({rate('swarm_prompt_tokens_total', CLIENT)})", "prompt"),
            Query(f"sum({rate('swarm_output_tokens_total', CLIENT)})", "output"),
            Query(f"sum({rate('swarm_reasoning_tokens_total', CLIENT)})", "reasoning"),
        ],
        TOKS,
        width=12,
    )
    lay.timeseries(
        "Output tok/s by workload",
        "Generated tokens per second, per workload.",
        [Query(f"sum by (workload) ({rate('swarm_output_tokens_total', CLIENT)})", "{{workload}}")],
        TOKS,
        width=12,
    )

    lay.row("Load")
    lay.timeseries(
        "Users",
        "Simulated users (concurrency) across all workers.",
        [Query(f"sum by (run_id) (swarm_users{{{RUN}}})", "users {{run_id}}")],
        "short",
    )
    lay.timeseries(
        "Workers",
        "Connected Locust workers, and workers lost during the run (missing heartbeat).",
        [
            Query(f"max by (run_id) (swarm_workers{{{RUN}}})", "workers {{run_id}}"),
            Query(f"max by (run_id) (swarm_degraded_workers{{{RUN}}})", "lost {{run_id}}"),
        ],
        "short",
    )
    lay.timeseries(
        "Stage",
        "The current load stage, numbered from 1 as the swarm's live line, tables and report number "
        "it (swarm_stage is the 0-based index; 1 without stages).",
        [Query(f"max by (run_id) (swarm_stage{{{RUN}}}) + 1", "stage {{run_id}}")],
        "short",
    )

    lay.row("Goodput (--goodput)")
    good, judged = "swarm_goodput_requests_total", "swarm_goodput_judged_requests_total"
    lay.timeseries(
        "Goodput by workload",
        "Requests per second meeting every per-request SLO of --goodput (e.g. ttft<=500ms,e2e<=10s), "
        "beside all finished requests per second. Empty without --goodput.",
        [
            Query(f"sum by (workload) ({rate(good, CLIENT)})", "good {{workload}}"),
            Query(f"sum({rate(req, CLIENT)})", "all requests"),
        ],
        "reqps",
        width=12,
    )
    lay.timeseries(
        "Goodput share by workload",
        "Share of the judged requests (non-warm-up, ok or failed) that met every --goodput SLO.",
        [
            Query(
                f"sum by (workload) ({rate(good, CLIENT)}) / sum by (workload) ({rate(judged, CLIENT)})",
                "{{workload}}",
            )
        ],
        "percentunit",
        width=12,
    )
    return d


def vllm_server() -> gdash.Dashboard:
    d = base(
        "llm-swarm-vllm-server",
        "vLLM server",
        "The server's own /metrics (vLLM >= 0.12 names, falling back to the pre-0.12 ones): "
        "latency, token throughput, scheduler and KV cache, prefix caching, speculative decoding.",
        ["server", "vllm"],
    )
    d = d.with_variable(
        label_variable("model_name", "model", "label_values(vllm:num_requests_running, model_name)")
    )
    lay = Layout(d)

    lay.row("Latency")
    lay.timeseries(
        "TTFT p50 / p95 / p99",
        "Server-side time to first token.",
        [
            Query(quantile(q, "vllm:time_to_first_token_seconds", SERVER), f"p{round(q * 100)}")
            for q in (0.5, 0.95, 0.99)
        ],
        "s",
    )
    lay.timeseries(
        "Inter-token latency p50 / p95",
        "Server-side inter-token latency "
        "(vllm:inter_token_latency_seconds; before 0.12 vllm:time_per_output_token_seconds).",
        [
            Query(
                quantile(
                    q, "vllm:inter_token_latency_seconds", SERVER, legacy="vllm:time_per_output_token_seconds"
                ),
                f"p{round(q * 100)}",
            )
            for q in (0.5, 0.95)
        ],
        "s",
    )
    lay.timeseries(
        "E2E p50 / p95 / p99",
        "Server-side request latency.",
        [
            Query(quantile(q, "vllm:e2e_request_latency_seconds", SERVER), f"p{round(q * 100)}")
            for q in (0.5, 0.95, 0.99)
        ],
        "s",
    )

    lay.row("Throughput")
    lay.timeseries(
        "Tokens/s (in, out, total)",
        "Prompt tokens processed and tokens generated per second. Plan capacity in tokens/s, not requests/s.",
        [
            Query(f"sum({rate('vllm:prompt_tokens_total', SERVER)})", "in (prompt)"),
            Query(f"sum({rate('vllm:generation_tokens_total', SERVER)})", "out (generation)"),
            Query(
                f"sum({rate('vllm:prompt_tokens_total', SERVER)}) + "
                f"sum({rate('vllm:generation_tokens_total', SERVER)})",
                "total",
            ),
        ],
        TOKS,
        width=12,
    )
    lay.timeseries(
        "Finish reasons",
        "Finished requests per second by finish reason (stop, length, abort...).",
        [
            Query(
                f"sum by (finished_reason) ({rate('vllm:request_success_total', SERVER)})",
                "{{finished_reason}}",
            )
        ],
        "reqps",
        width=12,
        stack=True,
    )

    lay.row("Scheduler and KV cache")
    lay.timeseries(
        "Running and waiting",
        "Requests in the running batch and in the waiting queue. A full running "
        "set with a growing queue is the capacity limit.",
        [
            Query(f"sum(vllm:num_requests_running{{{SERVER}}})", "running"),
            Query(f"sum(vllm:num_requests_waiting{{{SERVER}}})", "waiting"),
        ],
        "short",
    )
    lay.timeseries(
        "KV-cache usage",
        "Fraction of KV-cache blocks in use (vllm:kv_cache_usage_perc; before 0.12 "
        "vllm:gpu_cache_usage_perc). Near 100% means preemptions and rising TTFT.",
        [
            Query(
                f"max(vllm:kv_cache_usage_perc{{{SERVER}}} or vllm:gpu_cache_usage_perc{{{SERVER}}})",
                "KV cache used",
            )
        ],
        "percentunit",
    )
    lay.timeseries(
        "Batch size (tokens per engine step)",
        "vllm:iteration_tokens_total: tokens scheduled per "
        "engine iteration (prefill + decode), mean and p50/p95.",
        [
            Query(mean("vllm:iteration_tokens_total", SERVER), "mean"),
            Query(quantile(0.5, "vllm:iteration_tokens_total", SERVER), "p50"),
            Query(quantile(0.95, "vllm:iteration_tokens_total", SERVER), "p95"),
        ],
        "short",
    )
    lay.timeseries(
        "Queue time p50 / p95",
        "Time requests spent waiting before being scheduled.",
        [
            Query(quantile(q, "vllm:request_queue_time_seconds", SERVER), f"p{round(q * 100)}")
            for q in (0.5, 0.95)
        ],
        "s",
    )
    lay.timeseries(
        "Preemptions/s",
        "Requests preempted (KV cache exhausted: evicted and recomputed later).",
        [Query(f"sum({rate('vllm:num_preemptions_total', SERVER)})", "preemptions")],
        "short",
    )
    lay.timeseries(
        "Prefix-cache hit rate",
        "Prefix-cache hits / queries, in tokens (vllm:prefix_cache_*; before 0.12 vllm:gpu_prefix_cache_*).",
        [
            Query(
                f"sum{rate_or('vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total', SERVER)}"
                f" / sum{rate_or('vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total', SERVER)}",
                "hit rate",
            )
        ],
        "percentunit",
    )

    lay.row("Speculative decoding (only when configured)")
    acc = rate("vllm:spec_decode_num_accepted_tokens_total", SERVER)
    lay.timeseries(
        "Draft acceptance rate",
        "Accepted draft tokens / proposed draft tokens.",
        [
            Query(
                f"sum({acc}) / sum({rate('vllm:spec_decode_num_draft_tokens_total', SERVER)})",
                "acceptance rate",
            )
        ],
        "percentunit",
    )
    lay.timeseries(
        "Mean acceptance length",
        "1 + accepted tokens per draft.",
        [
            Query(
                f"1 + sum({acc}) / sum({rate('vllm:spec_decode_num_drafts_total', SERVER)})",
                "mean acceptance length",
            )
        ],
        "short",
    )
    lay.timeseries(
        "Acceptance by draft position",
        "Accepted tokens per draft, by position in the draft.",
        [
            Query(
                f"sum by (position) ({rate('vllm:spec_decode_num_accepted_tokens_per_pos_total', SERVER)}) "
                f"/ scalar(sum({rate('vllm:spec_decode_num_drafts_total', SERVER)}))",
                "position {{position}}",
            )
        ],
        "percentunit",
    )
    gpu_row(lay)
    return d


# dcgm-exporter's series per GPU; `Hostname` (released) or `hostname` (its main branch) names the host
GPU_BY = "Hostname, hostname, gpu"
GPU_LEGEND = "{{Hostname}}{{hostname}} gpu {{gpu}}"


def gpu_row(lay: Layout) -> None:
    """The GPUs behind the server, from NVIDIA's dcgm-exporter (scraped by the `dcgm` job)."""
    lay.row("GPUs (dcgm-exporter)")
    lay.timeseries(
        "GPU utilisation",
        "DCGM_FI_DEV_GPU_UTIL: share of time a kernel ran, per GPU. All near 100% at the ceiling: "
        "compute-bound. One low while the others are busy: a GPU the server does not use.",
        [Query(f"avg by ({GPU_BY}) (DCGM_FI_DEV_GPU_UTIL) / 100", GPU_LEGEND)],
        "percentunit",
    )
    lay.timeseries(
        "SM activity",
        "DCGM_FI_PROF_SM_ACTIVE (exported with a custom counters CSV), else "
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE (a default counter).",
        [
            Query(
                f"avg by ({GPU_BY}) (DCGM_FI_PROF_SM_ACTIVE) or avg by ({GPU_BY}) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
                GPU_LEGEND,
            )
        ],
        "percentunit",
    )
    lay.timeseries(
        "GPU memory used",
        "DCGM_FI_DEV_FB_USED (MiB): vLLM takes most of it up front for the KV cache.",
        [Query(f"avg by ({GPU_BY}) (DCGM_FI_DEV_FB_USED) * 1048576", GPU_LEGEND)],
        "bytes",
    )
    lay.timeseries(
        "Power",
        "DCGM_FI_DEV_POWER_USAGE (W) per GPU.",
        [Query(f"avg by ({GPU_BY}) (DCGM_FI_DEV_POWER_USAGE)", GPU_LEGEND)],
        "watt",
        width=12,
    )
    lay.timeseries(
        "Temperature",
        "DCGM_FI_DEV_GPU_TEMP (°C) per GPU.",
        [Query(f"avg by ({GPU_BY}) (DCGM_FI_DEV_GPU_TEMP)", GPU_LEGEND)],
        "celsius",
        width=12,
        minimum=None,
    )


def client_vs_server() -> gdash.Dashboard:
    d = base(
        "llm-swarm-client-vs-server",
        "Client vs server",
        "What the swarm measured next to what vLLM reports: TTFT and E2E p99 ratios and gaps "
        "(network, client queueing, client CPU), request and token counts reconciled.",
        ["client", "server", "vllm"],
    )
    d = d.with_variable(
        label_variable("run_id", "run", "label_values(swarm_requests_total, run_id)", include_all=False)
    ).with_variable(
        label_variable("model_name", "model", f"label_values(swarm_requests_total{{{RUN}}}, model_name)")
    )
    lay = Layout(d)
    c = 'run_id=~"$run_id", model_name=~"$model_name"'
    ok = c + ', outcome="ok"'
    client_ttft = quantile(0.99, "swarm_ttft_seconds", c)
    server_ttft = quantile(0.99, "vllm:time_to_first_token_seconds", SERVER)
    client_e2e = quantile(0.99, "swarm_e2e_seconds", c)
    server_e2e = quantile(0.99, "vllm:e2e_request_latency_seconds", SERVER)

    lay.row("Latency: client over server")
    lay.timeseries(
        "TTFT p99: client and server",
        "Client TTFT p99 (swarm) and server TTFT p99 (vLLM).",
        [Query(client_ttft, "client"), Query(server_ttft, "server")],
        "s",
    )
    lay.timeseries(
        "TTFT p99 ratio (client / server)",
        "1.0 = the client sees what the server measures. Above: "
        "network, client-side queueing or a CPU-bound client.",
        [Query(f"{client_ttft} / {server_ttft}", "client / server")],
        "short",
        minimum=None,
    )
    lay.timeseries(
        "TTFT p99 gap (client - server)",
        "Latency the server does not see.",
        [Query(f"{client_ttft} - {server_ttft}", "gap")],
        "s",
        minimum=None,
    )
    lay.timeseries(
        "E2E p99: client and server",
        "Client E2E p99 (swarm) and server E2E p99 (vLLM).",
        [Query(client_e2e, "client"), Query(server_e2e, "server")],
        "s",
    )
    lay.timeseries(
        "E2E p99 ratio (client / server)",
        "Client E2E p99 over server E2E p99.",
        [Query(f"{client_e2e} / {server_e2e}", "client / server")],
        "short",
        minimum=None,
    )
    lay.timeseries(
        "E2E p99 gap (client - server)",
        "Client E2E p99 minus server E2E p99.",
        [Query(f"{client_e2e} - {server_e2e}", "gap")],
        "s",
        minimum=None,
    )

    lay.row("Counts reconciled")
    client_ok = f"sum({rate('swarm_requests_total', ok)})"
    server_ok = f"sum({rate('vllm:request_success_total', SERVER)})"
    client_out = f"sum({rate('swarm_output_tokens_total', c)})"
    server_out = f"sum({rate('vllm:generation_tokens_total', SERVER)})"
    client_in = f"sum({rate('swarm_prompt_tokens_total', c)})"
    server_in = f"sum({rate('vllm:prompt_tokens_total', SERVER)})"
    lay.timeseries(
        "Requests/s: client ok vs server finished",
        "Requests the swarm saw succeed and requests vLLM "
        "finished. A gap: failures, other clients on the server, or aborted streams.",
        [
            Query(client_ok, "client ok"),
            Query(server_ok, "server finished"),
            Query(f"{server_ok} - {client_ok}", "gap (server - client)"),
        ],
        "reqps",
        minimum=None,
    )
    lay.timeseries(
        "Output tok/s: client vs server",
        "Tokens the swarm counted (server usage) and vLLM generated.",
        [
            Query(client_out, "client output"),
            Query(server_out, "server generation"),
            Query(f"{server_out} - {client_out}", "gap (server - client)"),
        ],
        TOKS,
        minimum=None,
    )
    lay.timeseries(
        "Prompt tok/s: client vs server",
        "Prompt tokens the swarm sent (server usage) and vLLM processed.",
        [
            Query(client_in, "client prompt"),
            Query(server_in, "server prompt"),
            Query(f"{server_in} - {client_in}", "gap (server - client)"),
        ],
        TOKS,
        minimum=None,
    )
    for title, client_metric, server_expr, desc in [
        (
            "Requests in range: client ok / server",
            "swarm_requests_total",
            "vllm:request_success_total",
            "Successful requests counted by the swarm over finished requests counted by vLLM, in the time range.",
        ),
        (
            "Output tokens in range: client / server",
            "swarm_output_tokens_total",
            "vllm:generation_tokens_total",
            "Output tokens counted by the swarm over tokens generated by vLLM, in the time range.",
        ),
        (
            "Prompt tokens in range: client / server",
            "swarm_prompt_tokens_total",
            "vllm:prompt_tokens_total",
            "Prompt tokens counted by the swarm over prompt tokens processed by vLLM, in the time range.",
        ),
    ]:
        sel = ok if client_metric == "swarm_requests_total" else c
        lay.stat(
            title,
            desc,
            [
                Query(
                    f"sum(increase({client_metric}{{{sel}}}[$__range])) / "
                    f"sum(increase({server_expr}{{{SERVER}}}[$__range]))"
                )
            ],
            "percentunit",
            width=8,
            decimals=1,
        )
    return d


def llamacpp_server() -> gdash.Dashboard:
    d = base(
        "llm-swarm-llamacpp-server",
        "llama.cpp server",
        "llama-server's own /metrics (started with --metrics): slots busy and requests deferred, "
        "prompt and generation token rates, the prompt cache, time per token.",
        ["server", "llamacpp"],
    )
    d = d.with_variable(
        label_variable("instance", "server", "label_values(llamacpp:requests_processing, instance)")
    )
    lay = Layout(d)

    lay.row("Slots")
    lay.timeseries(
        "Requests processing / deferred",
        "llamacpp:requests_processing (requests in a slot) and requests_deferred (waiting for a free "
        "slot). Processing pinned at --parallel while deferred grows: the slot count is the limit.",
        [
            Query(f"sum(llamacpp:requests_processing{{{LLAMA}}})", "processing"),
            Query(f"sum(llamacpp:requests_deferred{{{LLAMA}}})", "deferred"),
        ],
        "short",
        width=12,
    )
    lay.timeseries(
        "Busy slots per decode",
        "llamacpp:n_busy_slots_per_decode: the average batch of one llama_decode() call, since start.",
        [Query(f"avg(llamacpp:n_busy_slots_per_decode{{{LLAMA}}})", "slots per decode")],
        "short",
        width=12,
    )

    lay.row("Tokens")
    lay.timeseries(
        "Token throughput",
        "Prompt tokens evaluated (llamacpp:prompt_tokens_total, the cache's excluded), prompt tokens "
        "taken from the cache (prompt_tokens_cached_total) and tokens generated (tokens_predicted_total).",
        [
            Query(f"sum({rate('llamacpp:prompt_tokens_total', LLAMA)})", "prompt (evaluated)"),
            Query(f"sum({rate('llamacpp:prompt_tokens_cached_total', LLAMA)})", "prompt (from cache)"),
            Query(f"sum({rate('llamacpp:tokens_predicted_total', LLAMA)})", "generated"),
        ],
        "tok/s",
        width=12,
    )
    lay.timeseries(
        "Prompt cache hit rate",
        "Share of prompt tokens taken from the cache: cached / (cached + evaluated).",
        [
            Query(
                f"sum({rate('llamacpp:prompt_tokens_cached_total', LLAMA)}) / "
                f"(sum({rate('llamacpp:prompt_tokens_cached_total', LLAMA)}) + "
                f"sum({rate('llamacpp:prompt_tokens_total', LLAMA)}))",
                "hit rate",
            )
        ],
        "percentunit",
        width=12,
    )

    lay.row("Time per token")
    lay.timeseries(
        "Time per generated / evaluated token",
        "Seconds spent generating over tokens generated (tokens_predicted_seconds_total / "
        "tokens_predicted_total), and the same for prompt evaluation, over the rate window.",
        [
            Query(
                f"sum({rate('llamacpp:tokens_predicted_seconds_total', LLAMA)}) / "
                f"sum({rate('llamacpp:tokens_predicted_total', LLAMA)})",
                "per generated token",
            ),
            Query(
                f"sum({rate('llamacpp:prompt_seconds_total', LLAMA)}) / "
                f"sum({rate('llamacpp:prompt_tokens_total', LLAMA)})",
                "per prompt token",
            ),
        ],
        "s",
        width=12,
    )
    lay.stat(
        "Longest sequence",
        "llamacpp:n_tokens_max: the longest prompt + generation seen since start (against --ctx-size / --parallel).",
        [Query(f"max(llamacpp:n_tokens_max{{{LLAMA}}})")],
        "short",
        width=6,
    )
    lay.stat(
        "Decode calls",
        "llama_decode() calls over the dashboard's time range (llamacpp:n_decode_total).",
        [Query(f"sum(increase(llamacpp:n_decode_total{{{LLAMA}}}[$__range]))")],
        "short",
        width=6,
    )
    return d


# ----------------------------------------------------------------------------- every family

INST = 'instance=~"$instance"'
SGLANG_RANK0 = 'tp_rank=~"0|", pp_rank=~"0|", moe_ep_rank=~"0|"'
"""SGLang's scheduler series: one per rank with --enable-metrics-for-all-schedulers, every rank
reporting the same batch, so only rank 0 is read (no label: the default, TP rank 0 alone)."""
FAMILY_JOBS = "vllm|llamacpp|sglang|tgi|trtllm"  # the scrape jobs of dashboards/prometheus/prometheus.yml


def by_family(parts: dict[str, str]) -> str:
    """One PromQL over every family: each family's expression, labelled `family`, joined with `or`
    (the label keeps two families on one instance apart). A family without the figure has no part."""
    return " or ".join(f'label_replace({expr}, "family", "{fam}", "", "")' for fam, expr in parts.items())


def fsum(metric: str, sel: str = INST) -> str:
    return f"sum by (instance) ({metric}{{{sel}}})"


def frate(metric: str, sel: str = INST) -> str:
    return f"sum by (instance) ({rate(metric, sel)})"


def fquantile(q: float, metric: str, sel: str = INST) -> str:
    return f"histogram_quantile({q}, sum by (le, instance) ({rate(metric + '_bucket', sel)}))"


def sglang_selector(rank: bool = False) -> str:
    """The instance selector of an SGLang panel; `rank`: only the first data-parallel rank's series
    (a gauge every rank repeats is counted once)."""
    return f"{INST}, {SGLANG_RANK0}" if rank else INST


def trt(base: str) -> str:
    """TensorRT-LLM's name in trtllm-serve's current collector (`trtllm_`, at /prometheus/metrics).
    Dynamo's `trtllm:` re-export and the older unprefixed collector are not drawn."""
    return f"trtllm_{base}"


RUNNING = {
    "vllm": fsum("vllm:num_requests_running"),
    "llamacpp": fsum("llamacpp:requests_processing"),
    "sglang": fsum("sglang:num_running_reqs", sglang_selector(True)),
    "tgi": fsum("tgi_batch_current_size"),
    "trtllm": fsum(trt("num_requests_running")),
}
WAITING = {
    "vllm": fsum("vllm:num_requests_waiting"),
    "llamacpp": fsum("llamacpp:requests_deferred"),
    "sglang": fsum("sglang:num_queue_reqs", sglang_selector(True)),
    "tgi": fsum("tgi_queue_size"),
    "trtllm": fsum(trt("num_requests_waiting")),
}
KV_USAGE = {
    "vllm": f"avg by (instance) (vllm:kv_cache_usage_perc{{{INST}}} or vllm:gpu_cache_usage_perc{{{INST}}})",
    "llamacpp": f"avg by (instance) (llamacpp:kv_cache_usage_ratio{{{INST}}})",
    "sglang": f"avg by (instance) (sglang:token_usage{{{sglang_selector(True)}}})",
    "trtllm": f"avg by (instance) ({trt('kv_cache_utilization')}{{{INST}}})",
    # a reservation of the batch token budget, not KV blocks in use: its own series name says so
    "tgi (batch token budget)": f"{fsum('tgi_batch_current_max_tokens')} / {fsum('tgi_batch_max_total_tokens')}",
}
PROMPT_TOKENS = {
    "vllm": frate("vllm:prompt_tokens_total"),
    # llama-server's prompt_tokens_total leaves out the tokens it took from its prompt cache
    "llamacpp": f"{frate('llamacpp:prompt_tokens_total')} + {frate('llamacpp:prompt_tokens_cached_total')}",
    "sglang": frate("sglang:prompt_tokens_total"),
    "tgi": frate("tgi_request_input_length_sum"),
    "trtllm": frate(trt("prompt_tokens_total")),
}
GENERATION_TOKENS = {
    "vllm": frate("vllm:generation_tokens_total"),
    "llamacpp": frate("llamacpp:tokens_predicted_total"),
    "sglang": frate("sglang:generation_tokens_total"),
    "tgi": frate("tgi_request_generated_tokens_sum"),
    "trtllm": frate(trt("generation_tokens_total")),
}
PREFIX_HITS = {
    "vllm": f"{frate('vllm:prefix_cache_hits_total')} / {frate('vllm:prefix_cache_queries_total')}",
    "llamacpp": f"{frate('llamacpp:prompt_tokens_cached_total')} / "
    f"({frate('llamacpp:prompt_tokens_cached_total')} + {frate('llamacpp:prompt_tokens_total')})",
    "sglang": f"{frate('sglang:cached_tokens_total')} / {frate('sglang:prompt_tokens_total')}",
    "trtllm": f"{frate(trt('prompt_cached_tokens_total'))} / {frate(trt('prompt_tokens_total'))}",
}
PREEMPTIONS = {
    "vllm": frate("vllm:num_preemptions_total"),
    "sglang": frate("sglang:num_retracted_requests_total", sglang_selector(True)),
}
FINISHED = {
    "vllm": frate("vllm:request_success_total"),
    "sglang": frate("sglang:num_requests_total"),
    "tgi": frate("tgi_request_success"),
    "trtllm": frate(trt("request_success_total")),
}


def latency(q: float, names: dict[str, str]) -> str:
    return by_family({fam: fquantile(q, metric) for fam, metric in names.items()})


TTFT = {
    "vllm": "vllm:time_to_first_token_seconds",
    "sglang": "sglang:time_to_first_token_seconds",
    "trtllm": trt("time_to_first_token_seconds"),
}
ITL = {
    "vllm": "vllm:inter_token_latency_seconds",
    "sglang": "sglang:inter_token_latency_seconds",
    "trtllm": trt("time_per_output_token_seconds"),
}
E2E = {
    "vllm": "vllm:e2e_request_latency_seconds",
    "sglang": "sglang:e2e_request_latency_seconds",
    "tgi": "tgi_request_duration",
    "trtllm": trt("e2e_request_latency_seconds"),
}
QUEUE = {
    "vllm": "vllm:request_queue_time_seconds",
    "sglang": "sglang:queue_time_seconds",
    "tgi": "tgi_request_queue_duration",
    "trtllm": trt("request_queue_time_seconds"),
}
FAMILY_LEGEND = "{{family}} {{instance}}"


def llm_server() -> gdash.Dashboard:
    """Every server family on one dashboard: the same figure from each engine's own names.

    One dashboard whose queries join each family's expression with `or` (`by_family`), not one
    dashboard per family and not Prometheus recording rules. Rules would need the Prometheus side
    configured (a rule file in the compose stack, a PrometheusRule in Kubernetes) and `swarm grafana
    push` sends dashboards to a Grafana whose Prometheus the swarm does not own: a rule that is not
    installed there is an empty panel with no word why. The joined queries need nothing but the
    scrape, engines run side by side compare on one panel (seed 000 weighs vLLM against SGLang
    and TensorRT-LLM), and a new family is one entry in each table above. A family that lacks a
    figure has no part in its panel (absent, never 0), and each panel's description says which.
    The vLLM and llama.cpp dashboards stay for what only those engines have."""
    d = base(
        "llm-swarm-llm-server",
        "LLM server (every family)",
        "The same server figures from each engine's own /metrics (vLLM, llama.cpp, SGLang, TGI, "
        "TensorRT-LLM), one series per family and instance: scheduler, KV cache, tokens, prefix "
        "cache, server-side latency. Ollama has no /metrics.",
        ["server", "sglang", "tgi", "trtllm"],
    )
    d = d.with_variable(
        label_variable("instance", "server", f'label_values(up{{job=~"{FAMILY_JOBS}"}}, instance)')
    )
    lay = Layout(d)

    lay.row("Scheduler")
    lay.timeseries(
        "Running requests",
        "Requests in the running batch: vllm:num_requests_running, llamacpp:requests_processing, "
        "sglang:num_running_reqs (TP rank 0, data-parallel ranks summed), tgi_batch_current_size, "
        "trtllm_num_requests_running. Pinned at the engine's cap while requests wait: the cap is the limit.",
        [Query(by_family(RUNNING), FAMILY_LEGEND)],
        "short",
    )
    lay.timeseries(
        "Waiting requests",
        "Requests queued for the batch: vllm:num_requests_waiting, llamacpp:requests_deferred, "
        "sglang:num_queue_reqs, tgi_queue_size, trtllm_num_requests_waiting.",
        [Query(by_family(WAITING), FAMILY_LEGEND)],
        "short",
    )
    lay.timeseries(
        "KV cache usage",
        "Share of the KV cache in use: vllm:kv_cache_usage_perc, llamacpp:kv_cache_usage_ratio, "
        "sglang:token_usage, trtllm_kv_cache_utilization. TGI has no KV figure; its series is the "
        "share of the batch token budget the running batch reserves "
        "(tgi_batch_current_max_tokens / tgi_batch_max_total_tokens), a reservation.",
        [Query(by_family(KV_USAGE), FAMILY_LEGEND)],
        "percentunit",
    )

    lay.row("Tokens")
    lay.timeseries(
        "Prompt tokens/s",
        "Prompt tokens per second: vllm:prompt_tokens_total, llamacpp:prompt_tokens_total + "
        "prompt_tokens_cached_total, sglang:prompt_tokens_total, trtllm_prompt_tokens_total (these "
        "three count a request when it finishes), TGI's tgi_request_input_length sum (recorded at "
        "validation: requests that fail later count too).",
        [Query(by_family(PROMPT_TOKENS), FAMILY_LEGEND)],
        "tok/s",
    )
    lay.timeseries(
        "Generated tokens/s",
        "Tokens generated per second: vllm:generation_tokens_total, llamacpp:tokens_predicted_total, "
        "sglang:generation_tokens_total, trtllm_generation_tokens_total, TGI's "
        "tgi_request_generated_tokens sum (successful requests only).",
        [Query(by_family(GENERATION_TOKENS), FAMILY_LEGEND)],
        "tok/s",
    )
    lay.timeseries(
        "Prefix cache hit rate",
        "Prompt tokens served from the cache over prompt tokens: vLLM's prefix_cache_hits / queries, "
        "llama.cpp's cached / (cached + evaluated), SGLang's cached_tokens_total / prompt_tokens_total "
        "(not its cache_hit_rate gauge, zeroed on decode logs), TensorRT-LLM's prompt_cached_tokens / "
        "prompt_tokens. TGI has no prefix-cache figure.",
        [Query(by_family(PREFIX_HITS), FAMILY_LEGEND)],
        "percentunit",
    )
    lay.timeseries(
        "Preemptions / retractions per second",
        "Requests pushed out of the batch for KV room: vllm:num_preemptions_total, "
        "sglang:num_retracted_requests_total. llama.cpp, TGI and TensorRT-LLM have no such counter.",
        [Query(by_family(PREEMPTIONS), FAMILY_LEGEND)],
        "reqps",
        width=12,
    )
    lay.timeseries(
        "Finished requests per second",
        "vllm:request_success_total, sglang:num_requests_total, tgi_request_success, "
        "trtllm_request_success_total. llama.cpp has no such counter.",
        [Query(by_family(FINISHED), FAMILY_LEGEND)],
        "reqps",
        width=12,
    )

    lay.row("Server-side latency")
    lay.timeseries(
        "TTFT p99",
        "Server-side time to first token from each engine's histogram. TGI has none (its queue and "
        "validation times leave prefill out) and llama.cpp has no histograms: only the client's TTFT "
        "(the LLM load test dashboard) covers them.",
        [Query(latency(0.99, TTFT), FAMILY_LEGEND)],
        "s",
        width=6,
    )
    lay.timeseries(
        "Inter-token latency p99",
        "vllm:inter_token_latency_seconds and sglang:inter_token_latency_seconds (per token); "
        "trtllm_time_per_output_token_seconds is one mean per request (TPOT), not per token.",
        [Query(latency(0.99, ITL), FAMILY_LEGEND)],
        "s",
        width=6,
    )
    lay.timeseries(
        "E2E p99",
        "Server-side request latency: vllm:e2e_request_latency_seconds, "
        "sglang:e2e_request_latency_seconds, tgi_request_duration, trtllm_e2e_request_latency_seconds.",
        [Query(latency(0.99, E2E), FAMILY_LEGEND)],
        "s",
        width=6,
    )
    lay.timeseries(
        "Queue time p99",
        "Time waiting for the batch: vllm:request_queue_time_seconds, sglang:queue_time_seconds, "
        "tgi_request_queue_duration, trtllm_request_queue_time_seconds.",
        [Query(latency(0.99, QUEUE), FAMILY_LEGEND)],
        "s",
        width=6,
    )
    return d


DASHBOARDS = {
    "llm-load-test.json": llm_load_test,
    "vllm-server.json": vllm_server,
    "client-vs-server.json": client_vs_server,
    "llamacpp-server.json": llamacpp_server,
    "llm-server.json": llm_server,
}


# ----------------------------------------------------------------------------- output


def build_all() -> dict[str, dict]:
    """file name -> dashboard JSON model (plain dicts, as Grafana imports them)."""
    return {name: json.loads(JSONEncoder().encode(make().build())) for name, make in DASHBOARDS.items()}


def render(dashboard: dict) -> str:
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def write_all(out_dir: Path = DASHBOARD_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in build_all().items():
        path = out_dir / name
        path.write_text(render(model))
        written.append(path)
    return written


def stale(out_dir: Path = DASHBOARD_DIR) -> list[str]:
    """Names of the checked-in files that differ from what `build_all` makes now (or are missing)."""
    return [
        name
        for name, model in build_all().items()
        if not (out_dir / name).exists() or (out_dir / name).read_text() != render(model)
    ]


def iter_panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, rows and the panels inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", []) or []


def panel_queries(dashboard: dict) -> Iterator[tuple[str, str, str]]:
    """(panel title, refId, PromQL) for every query target."""
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", []) or []:
            if target.get("expr"):
                yield panel["title"], target["refId"], target["expr"]
