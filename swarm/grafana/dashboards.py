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
  Each family's part is generated from its table in swarm/core/server_families.py.

Each dashboard is one `Layout`: its header (uid, title, tags, variables), then its rows and panels
in order. Every selector uses regex matchers (`=~"$var"`) so the "All" value (`.*`) and multi-value
selections work; every rate uses `$__rate_interval`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
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

from swarm.core.server_families import FAMILIES, FAMILY_NAMES, Family
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


def total(metric: str, sel: str) -> str:
    """The counter's increase over the dashboard's time range, summed."""
    return f"sum(increase({metric}{{{sel}}}[$__range]))"


def per_second(metric: str, sel: str) -> str:
    return f"sum({rate(metric, sel)})"


# ----------------------------------------------------------------------------- panel helpers


@dataclass(frozen=True)
class Query:
    """One query of a panel: PromQL and its legend."""

    expr: str
    legend: str = ""


def summed(sel: str, legends: dict[str, str]) -> list[Query]:
    """Each gauge's series summed, under its legend."""
    return [Query(f"sum({metric}{{{sel}}})", legend) for metric, legend in legends.items()]


def percentiles(
    metric: str, sel: str, qs: Sequence[float] = (0.5, 0.95, 0.99), by: str = "", legacy: str | None = None
) -> list[Query]:
    """One query per quantile of the histogram, its legend `p50` (and ` {{by}}` per series of `by`)."""
    each = f" {{{{{by}}}}}" if by else ""
    return [Query(quantile(q, metric, sel, by=by, legacy=legacy), f"p{round(q * 100)}{each}") for q in qs]


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


def run_variables(*labels: tuple[str, str]) -> list[gdash.QueryVariable]:
    """The run (one at a time, newest first), then per (name, label) that label of the run's requests."""
    first = label_variable("run_id", "run", "label_values(swarm_requests_total, run_id)", include_all=False)
    query = "label_values(swarm_requests_total{%s}, %s)"
    return [first, *(label_variable(name, label, query % (RUN, name)) for name, label in labels)]


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


class Layout:
    """Builds one dashboard: its header and variables, then rows and panels in order; panel ids in
    order (unique, rows included), 24-column grid, a panel as wide as its row's `width` unless told."""

    def __init__(
        self, uid: str, title: str, description: str, tags: list[str], variables: list[gdash.QueryVariable]
    ) -> None:
        self.builder = base(uid, title, description, tags)
        for variable in variables:
            self.builder = self.builder.with_variable(variable)
        self.next_id = 1
        self.width = 8

    def _id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title: str, width: int = 8) -> None:
        self.builder.with_row(gdash.Row(title).id(self._id()))
        self.width = width

    def _add(
        self, panel, title: str, description: str, queries: list[Query], unit: str, width: int | None
    ) -> None:
        """The panel's id, words, datasource, unit, size and queries; added to the dashboard."""
        p = panel.id(self._id()).title(title).description(description).datasource(PROM).unit(unit)
        p = p.span(width or self.width)
        for ref, q in zip("ABCDEFGHIJ", queries, strict=False):
            t = gprom.Dataquery().expr(q.expr).ref_id(ref).datasource(PROM)
            if q.legend:
                t = t.legend_format(q.legend)
            p = p.with_target(t.range())
        self.builder.with_panel(p)

    def timeseries(
        self,
        title: str,
        description: str,
        queries: list[Query],
        unit: str,
        width: int | None = None,
        minimum: float | None = 0,
        stack: bool = False,
    ) -> None:
        p = (
            gts.Panel()
            .height(8)
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
        self._add(p, title, description, queries, unit, width)

    def stat(
        self,
        title: str,
        description: str,
        expr: str,
        unit: str,
        width: int | None = None,
        decimals: int | None = None,
    ) -> None:
        """The last value, large, over its sparkline."""
        p = (
            gstat.Panel()
            .height(4)
            .graph_mode(mcommon.BigValueGraphMode.AREA)
            .color_mode(mcommon.BigValueColorMode.VALUE)
            .text_mode(mcommon.BigValueTextMode.AUTO)
            .reduce_options(gcommon.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        )
        if decimals is not None:
            p = p.decimals(decimals)
        self._add(p, title, description, [Query(expr)], unit, width)


# ----------------------------------------------------------------------------- dashboards


def llm_load_test() -> gdash.Dashboard:
    lay = Layout(
        "llm-swarm-load-test",
        "LLM load test",
        "Client-side view of a swarm run (master's /metrics): throughput, outcomes, latency "
        "percentiles, token rates, users/workers/stage.",
        ["client"],
        run_variables(("workload", "workload"), ("model_name", "model")),
    )
    lay.builder = lay.builder.annotation(
        gdash.AnnotationQuery()
        .name("Stage changes (from metrics)")
        .datasource(PROM)
        .enable(True)
        .hide(False)
        .icon_color("#B877D9")
        .expr(f"changes(max by (run_id) (swarm_stage{{{RUN}}})[1m:5s]) > 0")
    )
    req = "swarm_requests_total"
    # cancelled (cut by the swarm's stop) and cancelled_by_client (--cancel): neither ok nor failed
    failed = CLIENT + ', outcome!~"ok|cancelled|cancelled_by_client"'
    ended = CLIENT + ', outcome!~"cancelled|cancelled_by_client"'
    output = per_second("swarm_output_tokens_total", CLIENT)

    lay.row("Overview", width=4)
    for title, description, expr, unit in [
        ("Requests/s", "Finished requests per second, all outcomes.", per_second(req, CLIENT), "reqps"),
        (
            "Error rate",
            "Share of the requests that ran to an end (ok or failed) that failed; cancelled ones (cut by "
            "the swarm's own stop or ramp-down, or by their client with --cancel) are neither, as in "
            "summary.json.",
            f"({per_second(req, failed)} or vector(0)) / {per_second(req, ended)}",
            "percentunit",
        ),
        (
            "TTFT p99",
            "Time to first token (reasoning or answer), 99th percentile.",
            quantile(0.99, "swarm_ttft_seconds", CLIENT),
            "s",
        ),
        (
            "E2E p99",
            "Request latency until [DONE], 99th percentile.",
            quantile(0.99, "swarm_e2e_seconds", CLIENT),
            "s",
        ),
        ("Output tok/s", "Generated tokens (reasoning + answer) per second.", output, TOKS),
    ]:
        lay.stat(title, description, expr, unit)
    in_range = total(req, CLIENT)
    lay.stat(
        "Requests in range", "Finished requests in the dashboard's time range.", in_range, "short", decimals=0
    )

    lay.row("Throughput and outcomes", width=12)
    lay.timeseries(
        "Requests/s by workload",
        "Finished requests per second, per workload (all outcomes).",
        [Query(f"sum by (workload) ({rate(req, CLIENT)})", "{{workload}}")],
        "reqps",
    )
    lay.timeseries(
        "Outcomes/s",
        "Finished requests per second by outcome (ok, http_error, stream_error, "
        "truncated, timeout, connect_error, bad_chunk).",
        [Query(f"sum by (outcome) ({rate(req, CLIENT)})", "{{outcome}}")],
        "reqps",
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
        (
            "swarm_ttftc_seconds",
            "First tool-call token",
            "Agent steps (--workload agent): time to the first tool-call token of the steps that called a tool.",
        ),
        (
            "swarm_task_seconds",
            "Agent task",
            "Agent tasks: from the first step's send to the last step's end (the steps' E2E and the tools' time).",
        ),
    ]:
        width = (
            12
            if title in ("TTFT", "TTFA", "First tool-call token", "Agent task")
            else 24
            if title == "Send lag"
            else 8
        )
        lay.timeseries(
            f"{title} p50 / p95 / p99", what, percentiles(metric, CLIENT, by="workload"), "s", width=width
        )

    lay.row("Tokens", width=12)
    lay.timeseries(
        "Token throughput",
        "Prompt, output (reasoning + answer) and reasoning tokens per second.",
        [
            Query(per_second("swarm_prompt_tokens_total", CLIENT), "prompt"),
            Query(output, "output"),
            Query(per_second("swarm_reasoning_tokens_total", CLIENT), "reasoning"),
        ],
        TOKS,
    )
    lay.timeseries(
        "Output tok/s by workload",
        "Generated tokens per second, per workload.",
        [Query(f"sum by (workload) ({rate('swarm_output_tokens_total', CLIENT)})", "{{workload}}")],
        TOKS,
    )

    lay.row("Load")
    for title, description, queries in [
        (
            "Users",
            "Simulated users (concurrency) across all workers.",
            [Query(f"sum by (run_id) (swarm_users{{{RUN}}})", "users {{run_id}}")],
        ),
        (
            "Workers",
            "Connected Locust workers, and workers lost during the run (missing heartbeat).",
            [
                Query(f"max by (run_id) (swarm_workers{{{RUN}}})", "workers {{run_id}}"),
                Query(f"max by (run_id) (swarm_degraded_workers{{{RUN}}})", "lost {{run_id}}"),
            ],
        ),
        (
            "Stage",
            "The current load stage, numbered from 1 as the swarm's live line, tables and report number "
            "it (swarm_stage is the 0-based index; 1 without stages).",
            [Query(f"max by (run_id) (swarm_stage{{{RUN}}}) + 1", "stage {{run_id}}")],
        ),
    ]:
        lay.timeseries(title, description, queries, "short")

    lay.row("Goodput (--goodput)", width=12)
    good = f"sum by (workload) ({rate('swarm_goodput_requests_total', CLIENT)})"
    judged = f"sum by (workload) ({rate('swarm_goodput_judged_requests_total', CLIENT)})"
    lay.timeseries(
        "Goodput by workload",
        "Requests per second meeting every per-request SLO of --goodput (e.g. ttft<=500ms,e2e<=10s), "
        "beside all finished requests per second. Empty without --goodput.",
        [Query(good, "good {{workload}}"), Query(per_second(req, CLIENT), "all requests")],
        "reqps",
    )
    lay.timeseries(
        "Goodput share by workload",
        "Share of the judged requests (non-warm-up, ok or failed) that met every --goodput SLO.",
        [Query(f"{good} / {judged}", "{{workload}}")],
        "percentunit",
    )
    return lay.builder


def vllm_server() -> gdash.Dashboard:
    lay = Layout(
        "llm-swarm-vllm-server",
        "vLLM server",
        "The server's own /metrics (vLLM >= 0.12 names, falling back to the pre-0.12 ones): "
        "latency, token throughput, scheduler and KV cache, prefix caching, speculative decoding.",
        ["server", "vllm"],
        [label_variable("model_name", "model", "label_values(vllm:num_requests_running, model_name)")],
    )
    lay.row("Latency")
    ttft = percentiles("vllm:time_to_first_token_seconds", SERVER)
    lay.timeseries("TTFT p50 / p95 / p99", "Server-side time to first token.", ttft, "s")
    lay.timeseries(
        "Inter-token latency p50 / p95",
        "Server-side inter-token latency "
        "(vllm:inter_token_latency_seconds; before 0.12 vllm:time_per_output_token_seconds).",
        percentiles(
            "vllm:inter_token_latency_seconds",
            SERVER,
            (0.5, 0.95),
            legacy="vllm:time_per_output_token_seconds",
        ),
        "s",
    )
    e2e = percentiles("vllm:e2e_request_latency_seconds", SERVER)
    lay.timeseries("E2E p50 / p95 / p99", "Server-side request latency.", e2e, "s")

    lay.row("Throughput", width=12)
    prompt = per_second("vllm:prompt_tokens_total", SERVER)
    generation = per_second("vllm:generation_tokens_total", SERVER)
    lay.timeseries(
        "Tokens/s (in, out, total)",
        "Prompt tokens processed and tokens generated per second. Plan capacity in tokens/s, not requests/s.",
        [
            Query(prompt, "in (prompt)"),
            Query(generation, "out (generation)"),
            Query(f"{prompt} + {generation}", "total"),
        ],
        TOKS,
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
        stack=True,
    )

    lay.row("Scheduler and KV cache")
    lay.timeseries(
        "Running and waiting",
        "Requests in the running batch and in the waiting queue. A full running "
        "set with a growing queue is the capacity limit.",
        summed(SERVER, {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting"}),
        "short",
    )
    kv = f"max(vllm:kv_cache_usage_perc{{{SERVER}}} or vllm:gpu_cache_usage_perc{{{SERVER}}})"
    lay.timeseries(
        "KV-cache usage",
        "Fraction of KV-cache blocks in use (vllm:kv_cache_usage_perc; before 0.12 "
        "vllm:gpu_cache_usage_perc). Near 100% means preemptions and rising TTFT.",
        [Query(kv, "KV cache used")],
        "percentunit",
    )
    lay.timeseries(
        "Batch size (tokens per engine step)",
        "vllm:iteration_tokens_total: tokens scheduled per "
        "engine iteration (prefill + decode), mean and p50/p95.",
        [
            Query(mean("vllm:iteration_tokens_total", SERVER), "mean"),
            *percentiles("vllm:iteration_tokens_total", SERVER, (0.5, 0.95)),
        ],
        "short",
    )
    queue = percentiles("vllm:request_queue_time_seconds", SERVER, (0.5, 0.95))
    lay.timeseries("Queue time p50 / p95", "Time requests spent waiting before being scheduled.", queue, "s")
    lay.timeseries(
        "Preemptions/s",
        "Requests preempted (KV cache exhausted: evicted and recomputed later).",
        [Query(per_second("vllm:num_preemptions_total", SERVER), "preemptions")],
        "short",
    )
    hits = rate_or("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total", SERVER)
    queries = rate_or("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total", SERVER)
    lay.timeseries(
        "Prefix-cache hit rate",
        "Prefix-cache hits / queries, in tokens (vllm:prefix_cache_*; before 0.12 vllm:gpu_prefix_cache_*).",
        [Query(f"sum{hits} / sum{queries}", "hit rate")],
        "percentunit",
    )

    lay.row("Speculative decoding (only when configured)")
    accepted = per_second("vllm:spec_decode_num_accepted_tokens_total", SERVER)
    drafts = per_second("vllm:spec_decode_num_drafts_total", SERVER)
    by_position = f"sum by (position) ({rate('vllm:spec_decode_num_accepted_tokens_per_pos_total', SERVER)})"
    for title, description, query, unit in [
        (
            "Draft acceptance rate",
            "Accepted draft tokens / proposed draft tokens.",
            Query(
                f"{accepted} / {per_second('vllm:spec_decode_num_draft_tokens_total', SERVER)}",
                "acceptance rate",
            ),
            "percentunit",
        ),
        (
            "Mean acceptance length",
            "1 + accepted tokens per draft.",
            Query(f"1 + {accepted} / {drafts}", "mean acceptance length"),
            "short",
        ),
        (
            "Acceptance by draft position",
            "Accepted tokens per draft, by position in the draft.",
            Query(f"{by_position} / scalar({drafts})", "position {{position}}"),
            "percentunit",
        ),
    ]:
        lay.timeseries(title, description, [query], unit)
    gpu_row(lay)
    return lay.builder


# dcgm-exporter's series per GPU; `Hostname` (released) or `hostname` (its main branch) names the host
GPU_BY = "Hostname, hostname, gpu"
GPU_LEGEND = "{{Hostname}}{{hostname}} gpu {{gpu}}"


def per_gpu(metric: str) -> str:
    return f"avg by ({GPU_BY}) ({metric})"


def gpu_row(lay: Layout) -> None:
    """The GPUs behind the server, from NVIDIA's dcgm-exporter (scraped by the `dcgm` job)."""
    lay.row("GPUs (dcgm-exporter)")
    for title, description, expr, unit, width, minimum in [
        (
            "GPU utilisation",
            "DCGM_FI_DEV_GPU_UTIL: share of time a kernel ran, per GPU. All near 100% at the ceiling: "
            "compute-bound. One low while the others are busy: a GPU the server does not use.",
            f"{per_gpu('DCGM_FI_DEV_GPU_UTIL')} / 100",
            "percentunit",
            8,
            0,
        ),
        (
            "SM activity",
            "DCGM_FI_PROF_SM_ACTIVE (exported with a custom counters CSV), else "
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE (a default counter).",
            f"{per_gpu('DCGM_FI_PROF_SM_ACTIVE')} or {per_gpu('DCGM_FI_PROF_GR_ENGINE_ACTIVE')}",
            "percentunit",
            8,
            0,
        ),
        (
            "GPU memory used",
            "DCGM_FI_DEV_FB_USED (MiB): vLLM takes most of it up front for the KV cache.",
            f"{per_gpu('DCGM_FI_DEV_FB_USED')} * 1048576",
            "bytes",
            8,
            0,
        ),
        ("Power", "DCGM_FI_DEV_POWER_USAGE (W) per GPU.", per_gpu("DCGM_FI_DEV_POWER_USAGE"), "watt", 12, 0),
        (
            "Temperature",
            "DCGM_FI_DEV_GPU_TEMP (°C) per GPU.",
            per_gpu("DCGM_FI_DEV_GPU_TEMP"),
            "celsius",
            12,
            None,
        ),
    ]:
        lay.timeseries(title, description, [Query(expr, GPU_LEGEND)], unit, width=width, minimum=minimum)


def client_vs_server() -> gdash.Dashboard:
    lay = Layout(
        "llm-swarm-client-vs-server",
        "Client vs server",
        "What the swarm measured next to what vLLM reports: TTFT and E2E p99 ratios and gaps "
        "(network, client queueing, client CPU), request and token counts reconciled.",
        ["client", "server", "vllm"],
        run_variables(("model_name", "model")),
    )
    c = 'run_id=~"$run_id", model_name=~"$model_name"'
    ok = c + ', outcome="ok"'

    lay.row("Latency: client over server")
    for name, client_metric, server_metric, ratio_what, gap_what in [
        (
            "TTFT",
            "swarm_ttft_seconds",
            "vllm:time_to_first_token_seconds",
            "1.0 = the client sees what the server measures. Above: "
            "network, client-side queueing or a CPU-bound client.",
            "Latency the server does not see.",
        ),
        (
            "E2E",
            "swarm_e2e_seconds",
            "vllm:e2e_request_latency_seconds",
            "Client E2E p99 over server E2E p99.",
            "Client E2E p99 minus server E2E p99.",
        ),
    ]:
        client = quantile(0.99, client_metric, c)
        server = quantile(0.99, server_metric, SERVER)
        both = [Query(client, "client"), Query(server, "server")]
        lay.timeseries(
            f"{name} p99: client and server",
            f"Client {name} p99 (swarm) and server {name} p99 (vLLM).",
            both,
            "s",
        )
        ratio = [Query(f"{client} / {server}", "client / server")]
        lay.timeseries(f"{name} p99 ratio (client / server)", ratio_what, ratio, "short", minimum=None)
        lay.timeseries(
            f"{name} p99 gap (client - server)",
            gap_what,
            [Query(f"{client} - {server}", "gap")],
            "s",
            minimum=None,
        )

    lay.row("Counts reconciled")
    counts = [  # what the swarm counted (metric, selector) and what vLLM counted
        ("swarm_requests_total", ok, "vllm:request_success_total"),
        ("swarm_output_tokens_total", c, "vllm:generation_tokens_total"),
        ("swarm_prompt_tokens_total", c, "vllm:prompt_tokens_total"),
    ]
    rates = [  # title, description, unit, the client's and the server's legends
        (
            "Requests/s: client ok vs server finished",
            "Requests the swarm saw succeed and requests vLLM "
            "finished. A gap: failures, other clients on the server, or aborted streams.",
            "reqps",
            "client ok",
            "server finished",
        ),
        (
            "Output tok/s: client vs server",
            "Tokens the swarm counted (server usage) and vLLM generated.",
            TOKS,
            "client output",
            "server generation",
        ),
        (
            "Prompt tok/s: client vs server",
            "Prompt tokens the swarm sent (server usage) and vLLM processed.",
            TOKS,
            "client prompt",
            "server prompt",
        ),
    ]
    for (client_metric, sel, server_metric), (title, what, unit, client_legend, server_legend) in zip(
        counts, rates, strict=True
    ):
        client = per_second(client_metric, sel)
        server = per_second(server_metric, SERVER)
        gap = Query(f"{server} - {client}", "gap (server - client)")
        both = [Query(client, client_legend), Query(server, server_legend), gap]
        lay.timeseries(title, what, both, unit, minimum=None)
    in_range = [  # title, description
        (
            "Requests in range: client ok / server",
            "Successful requests counted by the swarm over finished requests counted by vLLM, in the time range.",
        ),
        (
            "Output tokens in range: client / server",
            "Output tokens counted by the swarm over tokens generated by vLLM, in the time range.",
        ),
        (
            "Prompt tokens in range: client / server",
            "Prompt tokens counted by the swarm over prompt tokens processed by vLLM, in the time range.",
        ),
    ]
    for (client_metric, sel, server_metric), (title, what) in zip(counts, in_range, strict=True):
        share = f"{total(client_metric, sel)} / {total(server_metric, SERVER)}"
        lay.stat(title, what, share, "percentunit", decimals=1)
    return lay.builder


def llamacpp_server() -> gdash.Dashboard:
    lay = Layout(
        "llm-swarm-llamacpp-server",
        "llama.cpp server",
        "llama-server's own /metrics (started with --metrics): slots busy and requests deferred, "
        "prompt and generation token rates, the prompt cache, time per token.",
        ["server", "llamacpp"],
        [label_variable("instance", "server", "label_values(llamacpp:requests_processing, instance)")],
    )
    evaluated = per_second("llamacpp:prompt_tokens_total", LLAMA)
    cached = per_second("llamacpp:prompt_tokens_cached_total", LLAMA)
    generated = per_second("llamacpp:tokens_predicted_total", LLAMA)
    from_cache = f"{cached} / ({cached} + {evaluated})"  # the share of prompt tokens

    lay.row("Slots", width=12)
    lay.timeseries(
        "Requests processing / deferred",
        "llamacpp:requests_processing (requests in a slot) and requests_deferred (waiting for a free "
        "slot). Processing pinned at --parallel while deferred grows: the slot count is the limit.",
        summed(
            LLAMA, {"llamacpp:requests_processing": "processing", "llamacpp:requests_deferred": "deferred"}
        ),
        "short",
    )
    lay.timeseries(
        "Busy slots per decode",
        "llamacpp:n_busy_slots_per_decode: the average batch of one llama_decode() call, since start.",
        [Query(f"avg(llamacpp:n_busy_slots_per_decode{{{LLAMA}}})", "slots per decode")],
        "short",
    )

    lay.row("Tokens", width=12)
    lay.timeseries(
        "Token throughput",
        "Prompt tokens evaluated (llamacpp:prompt_tokens_total, the cache's excluded), prompt tokens "
        "taken from the cache (prompt_tokens_cached_total) and tokens generated (tokens_predicted_total).",
        [
            Query(evaluated, "prompt (evaluated)"),
            Query(cached, "prompt (from cache)"),
            Query(generated, "generated"),
        ],
        "tok/s",
    )
    lay.timeseries(
        "Prompt cache hit rate",
        "Share of prompt tokens taken from the cache: cached / (cached + evaluated).",
        [Query(from_cache, "hit rate")],
        "percentunit",
    )

    lay.row("Time per token", width=12)
    lay.timeseries(
        "Time per generated / evaluated token",
        "Seconds spent generating over tokens generated (tokens_predicted_seconds_total / "
        "tokens_predicted_total), and the same for prompt evaluation, over the rate window.",
        [
            Query(
                f"{per_second('llamacpp:tokens_predicted_seconds_total', LLAMA)} / {generated}",
                "per generated token",
            ),
            Query(f"{per_second('llamacpp:prompt_seconds_total', LLAMA)} / {evaluated}", "per prompt token"),
        ],
        "s",
    )
    lay.stat(
        "Longest sequence",
        "llamacpp:n_tokens_max: the longest prompt + generation seen since start (against --ctx-size / --parallel).",
        f"max(llamacpp:n_tokens_max{{{LLAMA}}})",
        "short",
        width=6,
    )
    lay.stat(
        "Decode calls",
        "llama_decode() calls over the dashboard's time range (llamacpp:n_decode_total).",
        total("llamacpp:n_decode_total", LLAMA),
        "short",
        width=6,
    )
    return lay.builder


# ----------------------------------------------------------------------------- every family

INST = 'instance=~"$instance"'
FAMILY_JOBS = "|".join(FAMILY_NAMES)  # dashboards/prometheus/prometheus.yml names each family's job so
FAMILY_LEGEND = "{{family}} {{instance}}"
PER_RANK = ("running", "waiting", "kv_usage", "preemptions")
"""The fields a family with `rank_labels` (SGLang) reports once per rank: its scheduler's gauges and
retraction counter. Its token and request counters are the tokenizer's (no rank labels), and a
quantile is the same over one rank's histogram as over all of them."""


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


def rank0(labels: Sequence[str]) -> str:
    """Only rank 0's series of each rank label (or a series without it: SGLang's default, TP rank 0
    alone reporting). With --enable-metrics-for-all-schedulers every rank reports the same batch."""
    return ", ".join(f'{label}=~"0|"' for label in labels)


def selector(fam: Family, field: str) -> str:
    """The instance selector of a family's part, rank 0's too where the family reports the field per rank."""
    return f"{INST}, {rank0(fam.rank_labels)}" if fam.rank_labels and field in PER_RANK else INST


def drawn(fam: Family, field: str) -> tuple[str, ...]:
    """The family's names for `field` (`success`: its finished-requests counter) that a panel reads,
    preferred first: those of its first prefix. TensorRT-LLM's are trtllm-serve's current `trtllm_`
    (the `trtllm` job scrapes /prometheus/metrics); Dynamo's `trtllm:` re-export and the older
    unprefixed collector are not drawn."""
    tables = (fam.gauges, fam.counters, fam.histograms)
    names = fam.success if field == "success" else next((t[field] for t in tables if field in t), ())
    return tuple(n for n in names if n.startswith(fam.prefixes[0]))


def gauge(field: str, how: str = "sum") -> dict[str, str]:
    """Each family's gauge per instance, its series summed (or `how`: avg), its older name `or`-ed
    in where the table has one (vLLM's KV gauge before 0.12)."""
    parts = {}
    for fam in FAMILIES.values():
        sel = selector(fam, field)
        if names := drawn(fam, field):
            series = " or ".join(f"{name}{{{sel}}}" for name in names)
            parts[fam.name] = f"{how} by (instance) ({series})"
    return parts


def gauge_average(field: str, proxy: str) -> dict[str, str]:
    """The gauge averaged per instance, then each family whose figure is a ratio of two gauges
    (`Family.ratios`: TGI's batch token budget for KV usage) as its own series, `FAMILY (proxy)`."""
    parts = gauge(field, "avg")
    for fam in FAMILIES.values():
        if field in fam.ratios:
            (num, den), sel = fam.ratios[field], selector(fam, field)
            parts[f"{fam.name} ({proxy})"] = ratio(fsum(num, sel), fsum(den, sel))
    return parts


def counter_rate(field: str) -> dict[str, str]:
    """Each family's counter per second per instance, by its preferred name alone (vLLM 0.10 and
    0.11 expose the new names beside the old ones); llama.cpp's prompt tokens with the cached ones
    added back (`Family.cached`)."""
    parts = {}
    for fam in FAMILIES.values():
        sel = selector(fam, field)
        if names := drawn(fam, field):
            parts[fam.name] = frate(names[0], sel)
            if field == "prompt_tokens" and fam.cached:
                parts[fam.name] += f" + {frate(fam.cached, sel)}"
    return parts


def ratio(num: str, den: str) -> str:
    return f"{num} / {den}"


def hit_rate() -> dict[str, str]:
    """Prompt tokens served from the prefix cache over prompt tokens: `prefix_hits / prefix_queries`,
    or where the cached tokens are left out of the prompt tokens (`Family.cached`, llama.cpp)
    cached / (cached + prompt tokens)."""
    hits, queries = counter_rate("prefix_hits"), counter_rate("prefix_queries")
    parts = {}
    for fam in FAMILIES.values():
        if fam.name in hits:
            parts[fam.name] = ratio(hits[fam.name], queries[fam.name])
        elif fam.cached:
            sel = selector(fam, "prefix_hits")
            cached, prompt = frate(fam.cached, sel), frate(drawn(fam, "prompt_tokens")[0], sel)
            parts[fam.name] = ratio(cached, f"({cached} + {prompt})")
    return parts


def histogram(field: str) -> dict[str, str]:
    """Each family's histogram (its preferred base name) for `latency`."""
    return {fam.name: names[0] for fam in FAMILIES.values() if (names := drawn(fam, field))}


def latency(q: float, names: dict[str, str]) -> str:
    return by_family({fam: fquantile(q, metric) for fam, metric in names.items()})


RUNNING = gauge("running")
WAITING = gauge("waiting")
# a reservation of the batch token budget, not KV blocks in use: its own series name says so
KV_USAGE = gauge_average("kv_usage", "batch token budget")
PROMPT_TOKENS = counter_rate("prompt_tokens")
GENERATION_TOKENS = counter_rate("generation_tokens")
PREFIX_HITS = hit_rate()
PREEMPTIONS = counter_rate("preemptions")
FINISHED = counter_rate("success")
TTFT = histogram("ttft")
ITL = histogram("itl")
E2E = histogram("e2e")
QUEUE = histogram("queue")


# each row's panels: title, description (prose: it names each family's metrics), query, unit, width
FAMILY_ROWS: dict[str, list[tuple[str, str, str, str, int]]] = {
    "Scheduler": [
        (
            "Running requests",
            "Requests in the running batch: vllm:num_requests_running, llamacpp:requests_processing, "
            "sglang:num_running_reqs (TP rank 0, data-parallel ranks summed), tgi_batch_current_size, "
            "trtllm_num_requests_running. Pinned at the engine's cap while requests wait: the cap is "
            "the limit.",
            by_family(RUNNING),
            "short",
            8,
        ),
        (
            "Waiting requests",
            "Requests queued for the batch: vllm:num_requests_waiting, llamacpp:requests_deferred, "
            "sglang:num_queue_reqs, tgi_queue_size, trtllm_num_requests_waiting.",
            by_family(WAITING),
            "short",
            8,
        ),
        (
            "KV cache usage",
            "Share of the KV cache in use: vllm:kv_cache_usage_perc, llamacpp:kv_cache_usage_ratio, "
            "sglang:token_usage, trtllm_kv_cache_utilization. TGI has no KV figure; its series is the "
            "share of the batch token budget the running batch reserves "
            "(tgi_batch_current_max_tokens / tgi_batch_max_total_tokens), a reservation.",
            by_family(KV_USAGE),
            "percentunit",
            8,
        ),
    ],
    "Tokens": [
        (
            "Prompt tokens/s",
            "Prompt tokens per second: vllm:prompt_tokens_total, llamacpp:prompt_tokens_total + "
            "prompt_tokens_cached_total, sglang:prompt_tokens_total, trtllm_prompt_tokens_total (these "
            "three count a request when it finishes), TGI's tgi_request_input_length sum (recorded at "
            "validation: requests that fail later count too).",
            by_family(PROMPT_TOKENS),
            "tok/s",
            8,
        ),
        (
            "Generated tokens/s",
            "Tokens generated per second: vllm:generation_tokens_total, llamacpp:tokens_predicted_total, "
            "sglang:generation_tokens_total, trtllm_generation_tokens_total, TGI's "
            "tgi_request_generated_tokens sum (successful requests only).",
            by_family(GENERATION_TOKENS),
            "tok/s",
            8,
        ),
        (
            "Prefix cache hit rate",
            "Prompt tokens served from the cache over prompt tokens: vLLM's prefix_cache_hits / queries, "
            "llama.cpp's cached / (cached + evaluated), SGLang's cached_tokens_total / prompt_tokens_total "
            "(not its cache_hit_rate gauge, zeroed on decode logs), TensorRT-LLM's prompt_cached_tokens / "
            "prompt_tokens. TGI has no prefix-cache figure.",
            by_family(PREFIX_HITS),
            "percentunit",
            8,
        ),
        (
            "Preemptions / retractions per second",
            "Requests pushed out of the batch for KV room: vllm:num_preemptions_total, "
            "sglang:num_retracted_requests_total. llama.cpp, TGI and TensorRT-LLM have no such counter.",
            by_family(PREEMPTIONS),
            "reqps",
            12,
        ),
        (
            "Finished requests per second",
            "vllm:request_success_total, sglang:num_requests_total, tgi_request_success, "
            "trtllm_request_success_total. llama.cpp has no such counter.",
            by_family(FINISHED),
            "reqps",
            12,
        ),
    ],
    "Server-side latency": [
        (
            "TTFT p99",
            "Server-side time to first token from each engine's histogram. TGI has none (its queue and "
            "validation times leave prefill out) and llama.cpp has no histograms: only the client's TTFT "
            "(the LLM load test dashboard) covers them.",
            latency(0.99, TTFT),
            "s",
            6,
        ),
        (
            "Inter-token latency p99",
            "vllm:inter_token_latency_seconds and sglang:inter_token_latency_seconds (per token); "
            "trtllm_time_per_output_token_seconds is one mean per request (TPOT), not per token.",
            latency(0.99, ITL),
            "s",
            6,
        ),
        (
            "E2E p99",
            "Server-side request latency: vllm:e2e_request_latency_seconds, "
            "sglang:e2e_request_latency_seconds, tgi_request_duration, trtllm_e2e_request_latency_seconds.",
            latency(0.99, E2E),
            "s",
            6,
        ),
        (
            "Queue time p99",
            "Time waiting for the batch: vllm:request_queue_time_seconds, sglang:queue_time_seconds, "
            "tgi_request_queue_duration, trtllm_request_queue_time_seconds.",
            latency(0.99, QUEUE),
            "s",
            6,
        ),
    ],
}


def llm_server() -> gdash.Dashboard:
    """Every server family on one dashboard: the same figure from each engine's own names.

    One dashboard whose queries join each family's expression with `or` (`by_family`), not one
    dashboard per family and not Prometheus recording rules. Rules would need the Prometheus side
    configured (a rule file in the compose stack, a PrometheusRule in Kubernetes) and `swarm grafana
    push` sends dashboards to a Grafana whose Prometheus the swarm does not own: a rule that is not
    installed there is an empty panel with no word why. The joined queries need nothing but the
    scrape, engines run side by side compare on one panel (seed 000 weighs vLLM against SGLang
    and TensorRT-LLM), and each family's parts are generated from its table in
    swarm/core/server_families.py (a new family: its table, and its names in the descriptions). A
    family that lacks a figure has no part in its panel (absent, never 0), and each panel's
    description says which. The vLLM and llama.cpp dashboards stay for what only those engines have."""
    lay = Layout(
        "llm-swarm-llm-server",
        "LLM server (every family)",
        "The same server figures from each engine's own /metrics (vLLM, llama.cpp, SGLang, TGI, "
        "TensorRT-LLM), one series per family and instance: scheduler, KV cache, tokens, prefix "
        "cache, server-side latency. Ollama has no /metrics.",
        ["server", "sglang", "tgi", "trtllm"],
        [label_variable("instance", "server", f'label_values(up{{job=~"{FAMILY_JOBS}"}}, instance)')],
    )
    for row, panels in FAMILY_ROWS.items():
        lay.row(row)
        for title, description, expr, unit, width in panels:
            lay.timeseries(title, description, [Query(expr, FAMILY_LEGEND)], unit, width=width)
    return lay.builder


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
