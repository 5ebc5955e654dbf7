"""`swarm report DIR`: DIR/report.html (self-contained) + the main plots as PNGs + DIR/stages.csv.

Rendered from the run's files only (loaded by swarm/analysis/rundir.py: summary.json, the request
records, server_metrics.jsonl, client_cpu.jsonl), so it can be re-rendered at any time. Every
piece may be missing: the report says what it lacks and shows the rest. The HTML embeds its PNGs
(swarm/analysis/plots.py) as data URIs and inline CSS: no script, font or stylesheet from the network.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swarm.analysis import conversations, plots, table
from swarm.analysis.finding import Finding
from swarm.analysis.gpu_diagnosis import GPU_ACTIVE, GPU_IDLE
from swarm.analysis.plots import PNGS, render_plots
from swarm.analysis.rundir import RunData, findings, load_run, slo_text, stage_rows
from swarm.analysis.table import drain_line
from swarm.core.units import ms_number, percent_text, stage_name, stage_number
from swarm.stats.cpu import cpu_limit
from swarm.stats.trace_replay import replay_lines

__all__ = [  # the report's own names, and the loader's that `swarm.analysis.report` always offered
    "CAPTIONS",
    "CSS",
    "PNGS",
    "REPORT",
    "STAGES_CSV",
    "RunData",
    "configure",
    "findings",
    "load_run",
    "main",
    "render_html",
    "render_plots",
    "slo_text",
    "stage_rows",
    "stage_table",
    "write_report",
]

REPORT = "report.html"
STAGES_CSV = "stages.csv"


# ---------------------------------------------------------------------------------------- stage table


def stage_table(data: RunData) -> Any:
    """One row per stage: client numbers, server numbers, client CPU (the stages.csv columns)."""
    import pandas as pd

    cpu = data.cpu.by_stage()
    out = []
    for r in data.rows:
        s = data.server.get(r.stage)
        lat = s.latency if s else {}
        row: dict[str, Any] = {
            "stage": r.stage,
            "name": stage_name(r.stage),
            "users": r.users,
            "duration_s": r.duration_s,
            "requests": r.requests,
            "failures": r.failures,
            "cancelled": r.cancelled,
            "qps": r.qps,
            "output_tok_s": r.output_tok_s,
            "ttft_p50_s": r.ttft_p50,
            "ttft_p99_s": r.ttft_p99,
            "e2e_p50_s": r.e2e_p50,
            "e2e_p99_s": r.e2e_p99,
            "tpot_p50_s": r.tpot_p50,
            "itl_p99_s": r.itl_p99,
            "client_cpu_max_pct": cpu.get(r.stage),
        }
        if s is not None:
            row.update(
                {
                    "srv_running_mean": s.running_mean,
                    "srv_running_max": s.running_max,
                    "srv_waiting_mean": s.waiting_mean,
                    "srv_waiting_max": s.waiting_max,
                    "srv_kv_mean": s.kv_mean,
                    "srv_kv_max": s.kv_max,
                    "srv_preemptions": s.preemptions,
                    "srv_prefix_hit_rate": s.prefix_hit_rate,
                    "srv_prompt_tok_s": s.prompt_tok_s,
                    "srv_generation_tok_s": s.generation_tok_s,
                    "srv_requests": s.requests,
                    "srv_finish_reasons": json.dumps(s.finish_reasons) if s.finish_reasons else None,
                    "srv_spec_acceptance_rate": s.spec_acceptance_rate,
                    "srv_spec_mean_acceptance_length": s.spec_mean_acceptance_length,
                }
            )
            for key in ("ttft", "itl", "e2e", "queue"):
                for q in ("p50", "p99"):
                    row[f"srv_{key}_{q}_s"] = (lat.get(key) or {}).get(q)
        out.append(row)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------- HTML

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left} tr.untrusted td{background:#fff0f0}
ul.findings li{margin:5px 0} .k{font-weight:600;font-family:monospace;font-size:12px;color:#555}
li.untrusted{color:#a00} .note{color:#8a5a00;font-size:13px} figure{margin:12px 0}
figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:12px;color:#555}
"""


def _fmt(v: Any, kind: str = "") -> str:
    """A table cell: "ms" (seconds under an ms header; thousands separated from 10 s on), "pct"
    (a fraction), "int", else a float to one decimal or escaped text; "-" for None/NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if kind == "ms":
        return ms_number(v, thousands=v >= 10)
    if kind == "pct":
        return percent_text(v)
    if kind == "int":
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return html.escape(str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], row_class: Sequence[str] = ()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"


def _stage_html(data: RunData, found: Sequence[Finding]) -> str:
    untrusted = {f.stage for f in found if not f.trusted and f.kind == "client_bound"}
    cpu = data.cpu.by_stage()
    header = [
        "stage",
        "users",
        "req",
        "fail",
        "cancel",
        "QPS",
        "out tok/s",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "E2E p50 s",
        "E2E p99 s",
        "TPOT p50 ms",
        "ITL p99 ms",
        "running mean/max",
        "waiting mean/max",
        "KV mean/max",
        "preempt",
        "prefix hit",
        "gen tok/s",
        "client CPU max",
    ]
    rows, classes = [], []
    for r in data.rows:
        s = data.server.get(r.stage)
        users = "-" if r.users is None else f"{'~' if data.users_estimated else ''}{r.users}"

        def pair(a: Any, b: Any, kind: str = "") -> str:
            return "-" if a is None and b is None else f"{_fmt(a, kind)} / {_fmt(b, kind)}"

        rows.append(
            [
                str(stage_number(r.stage)),
                users,
                _fmt(r.requests, "int"),
                _fmt(r.failures, "int"),
                _fmt(r.cancelled, "int"),
                _fmt(r.qps),
                _fmt(r.output_tok_s),
                _fmt(r.ttft_p50, "ms"),
                _fmt(r.ttft_p99, "ms"),
                "-" if r.e2e_p50 is None else f"{r.e2e_p50:.2f}",
                "-" if r.e2e_p99 is None else f"{r.e2e_p99:.2f}",
                _fmt(r.tpot_p50, "ms"),
                _fmt(r.itl_p99, "ms"),
                pair(s.running_mean, s.running_max) if s else "-",
                pair(s.waiting_mean, s.waiting_max) if s else "-",
                pair(s.kv_mean, s.kv_max, "pct") if s else "-",
                _fmt(s.preemptions, "int") if s else "-",
                _fmt(s.prefix_hit_rate, "pct") if s else "-",
                _fmt(s.generation_tok_s) if s else "-",
                "-" if cpu.get(r.stage) is None else f"{cpu[r.stage]:.0f}%",
            ]
        )
        classes.append("untrusted" if r.stage in untrusted else "")
    return _table(header, rows, classes)


def _bucket_text(v: float | None, bucket: tuple[float, float] | None) -> str:
    """A server percentile with the histogram bucket it was interpolated in: "1666 (1000-2500)"."""
    if v is None:
        return "-"
    if bucket is None:
        return _fmt(v, "ms")
    hi = "+Inf" if bucket[1] == float("inf") else f"{bucket[1] * 1000:.0f}"
    return f"{_fmt(v, 'ms')} ({bucket[0] * 1000:.0f}-{hi})"


def _client_server_html(data: RunData) -> str:
    header = [
        "stage",
        "users",
        "requests client / server",
        "TTFT mean client",
        "server",
        "gap",
        "TTFT p50 client",
        "server (bucket)",
        "TTFT p99 client",
        "server (bucket)",
        "server queue p50/p99",
        "server ITL p50/p99",
        "server E2E p50/p99",
        "client ok",
        "server finished",
        "client out tok",
        "server gen tok",
        "finish reasons",
    ]
    rows = []
    for r in data.rows:
        s = data.server.get(r.stage)
        lat = s.latency if s else {}
        cmp = data.ttft_pairs.get(r.stage)

        def pq(key: str, kind: str = "ms", lat: Mapping[str, Any] = lat) -> str:
            d = lat.get(key) or {}
            return "-" if not d else f"{_fmt(d.get('p50'), kind)} / {_fmt(d.get('p99'), kind)}"

        if cmp is None:
            same = ["-"] * 8
        else:
            c, v = cmp.client, cmp.server
            same = [
                f"{c.count:,.0f} / {v.count:,.0f}" + ("" if cmp.same_requests else " (not the same)"),
                _fmt(c.mean, "ms"),
                _fmt(v.mean, "ms"),
                _fmt(cmp.mean_gap, "ms"),
                _fmt(c.quantiles.get("p50"), "ms"),
                _bucket_text(v.quantiles.get("p50"), v.buckets.get("p50")),
                _fmt(c.quantiles.get("p99"), "ms"),
                _bucket_text(v.quantiles.get("p99"), v.buckets.get("p99")),
            ]
        rows.append(
            [
                str(stage_number(r.stage)),
                "-" if r.users is None else str(r.users),
                *same,
                pq("queue"),
                pq("itl"),
                "-"
                if not lat.get("e2e")
                else f"{lat['e2e']['p50'] or 0:.2f} / {lat['e2e']['p99'] or 0:.2f} s",
                _fmt(r.requests - r.failures - r.cancelled, "int"),
                _fmt(s.requests, "int") if s else "-",
                _fmt(r.output_tokens, "int"),
                _fmt(s.generation_tokens, "int") if s else "-",
                html.escape(", ".join(f"{k} {v:,.0f}" for k, v in s.finish_reasons.items())) if s else "-",
            ]
        )
    note = (
        "<p class='meta'>Times in ms. TTFT on the same requests: the server observes a request's TTFT "
        "when its engine makes the first token, so the client's records are taken here by the time "
        "they received their first token, inside the server's window (its two scrapes), not by the "
        "stage they were sent in; 'requests' shows both sides counted the same ones. The means are "
        "exact on both sides (a histogram's sum and count), so their gap is the time between the "
        "engine and the client: the HTTP front-end, the network and the client. Server percentiles "
        "are interpolated inside a histogram bucket (in brackets, ms): the true value is anywhere in "
        "it (vLLM's TTFT buckets are 0.25-2.5 s wide above 0.1 s), so compare the client's percentile "
        "with the bucket, not with the interpolated figure. The rest of the row (queue, ITL, E2E, "
        "counts) is per stage window, finished requests by the window they finished in.</p>"
    )
    spec = [
        r
        for r in data.rows
        if data.server.get(r.stage) and data.server[r.stage].spec_acceptance_rate is not None
    ]
    extra = ""
    if spec:
        extra = "<h3>Speculative decoding</h3>" + _table(
            ["stage", "users", "acceptance rate", "mean acceptance length"],
            [
                [
                    str(stage_number(r.stage)),
                    str(r.users),
                    _fmt(data.server[r.stage].spec_acceptance_rate, "pct"),
                    f"{data.server[r.stage].spec_mean_acceptance_length or 0:.2f}",
                ]
                for r in spec
            ],
        )
    return _table(header, rows) + note + extra


CAPTIONS = {
    "qps_vs_concurrency.png": "QPS vs concurrency; the dashed line marks the ceiling the diagnosis found.",
    "latency_vs_concurrency.png": "TTFT and end-to-end latency percentiles vs concurrency (client side).",
    "throughput.png": "Token throughput: client output tokens/s and the server's prompt/generation tokens/s.",
    "server_timeline.png": "The server's running/waiting requests and KV-cache usage over time, stage by stage.",
    "client_vs_server_ttft.png": "TTFT on the same requests: the client's (by the time it got its first token) and the server's histogram; the shaded band is the bucket the server's p99 was interpolated in.",
    "requests_timeline.png": "Every request's TTFT by the time it was sent.",
    "search.png": "The search: each probed load in order, and the bracket narrowing after each probe.",
}


GPU_HEADER = (
    "Stage", "GPU", "Model", "Util mean", "Util max", "SM active", "Memory used max (GiB)",
    "Power mean / max (W)", "Temp max (°C)", "Scrapes",
)  # fmt: skip


def _gpu_html(data: RunData) -> str:
    """One row per stage and GPU (--gpu-metrics: dcgm-exporter), idle GPUs next to busy ones marked."""
    by_stage = {r.stage: r for r in data.rows}
    rows, classes = [], []
    for stage, gpus in sorted(data.gpus.items()):
        label = by_stage[stage].label if stage in by_stage else stage_name(stage)
        busy = any((g.util_mean or 0.0) >= GPU_ACTIVE for g in gpus)
        for g in gpus:
            total = f" of {g.fb_total_mib / 1024:,.0f}" if g.fb_total_mib else ""
            used = "-" if g.fb_used_max_mib is None else f"{g.fb_used_max_mib / 1024:,.1f}{total}"
            rows.append(
                [
                    html.escape(label),
                    html.escape(g.name + (f" ({g.uuid})" if g.uuid else "")),
                    _fmt(g.model),
                    _fmt(g.util_mean, "pct"),
                    _fmt(g.util_max, "pct"),
                    _fmt(g.sm_active_mean, "pct"),
                    used,
                    f"{_fmt(g.power_mean_w)} / {_fmt(g.power_max_w)}",
                    _fmt(g.temp_max_c),
                    _fmt(g.samples, "int"),
                ]
            )
            classes.append("untrusted" if busy and (g.util_mean or 0.0) < GPU_IDLE else "")
    return _table(GPU_HEADER, rows, classes)


def _search_html(data: RunData) -> str:
    from swarm.analysis import search

    section = search.html_section(data)
    early = "".join(f"<p class='note'>{html.escape(line)}</p>" for line in search.early_ends(data.summary))
    settling = search.settling_note(data.summary)
    early += f"<p class='note'>{html.escape(settling)}</p>" if settling else ""
    return (f"<h2>Search</h2>\n{section}\n" if section else "") + early


def prefix_cache_lines(data: RunData) -> list[str]:
    """The server's prefix-cache hit rate over the run beside the share the workload meant to hit."""
    intended = data.summary.get("intended_prefix_share") or {}
    if not intended:
        return []
    server = data.run_server.prefix_hit_rate if data.run_server is not None else None
    meant = ", ".join(f"{html.escape(k)} {_fmt(v, 'pct')}" for k, v in sorted(intended.items()))
    return [f"prefix cache: server hit rate {_fmt(server, 'pct')} (intended shared prefix: {meant})"]


def _conversations_html(data: RunData) -> str:
    """chat_session runs: users vs requests in flight, TTFT and prompt tokens by turn, and the
    server's prefix-cache hit rate over time. Empty for runs without conversations."""
    sessions = data.summary.get("sessions")
    if not sessions:
        return ""
    turns = _table(
        ["turn", "requests", "ok", "prompt tokens (mean)", "TTFT p50 (ms)", "TTFT p99 (ms)"],
        [
            [html.escape(k), _fmt(n, "int"), _fmt(ok, "int"), _fmt(prompt), _fmt(p50, "ms"), _fmt(p99, "ms")]
            for k, n, ok, prompt, p50, p99 in conversations.turn_rows(data.summary)
        ],
    )
    hits = conversations.prefix_hit_over_time(data.snapshots, plots._t0(data))
    hit_table = (
        _table(
            ["from s", "to s", "server prefix-cache hit rate"],
            [[f"{a:.0f}", f"{b:.0f}", _fmt(rate, "pct")] for a, b, rate in hits],
        )
        if hits
        else "<p class='note'>No prefix-cache counters in the server's metrics.</p>"
    )
    flight = sessions.get("in_flight_mean")
    return (
        "<h2>Conversations</h2>\n"
        f"<p class='meta'>{_fmt(sessions.get('started'), 'int')} conversations started, "
        f"{_fmt(sessions.get('cut_at_max_model_len'), 'int')} cut at max_model_len; "
        f"{_fmt(data.summary.get('users'), 'int')} users (one conversation each at a time) kept "
        f"{_fmt(flight)} requests in flight on average: think time is not load.</p>\n"
        f"{turns}\n<p class='meta'>Prefix-cache hit rate over time (the server's counters):</p>\n{hit_table}\n"
    )


def render_html(data: RunData, found: Sequence[Finding], pngs: Mapping[str, bytes]) -> str:
    s = data.summary
    meta = [f"run <b>{html.escape(data.name)}</b>"]
    for key, label in (
        ("model_name", "model"),
        ("start_time", "start"),
        ("duration_s", "duration s"),
        ("users", "max users"),
        ("workers", "workers"),
    ):
        if s.get(key) is not None:
            meta.append(f"{label} {_fmt(s[key])}")
    meta.append(f"server metrics: {data.source} ({len(data.snapshots)} scrapes)")
    meta.extend(prefix_cache_lines(data))
    if data.gpu_snapshots:
        hosts = len({g.host for snap in data.gpu_snapshots for g in snap.gpus})
        meta.append(f"GPU metrics: {len(data.gpu_snapshots)} scrapes, {hosts} host{'s' if hosts > 1 else ''}")
    meta.extend(html.escape(line.removeprefix("swarm: ")) for line in replay_lines(s))
    if isinstance(aborted := s.get("aborted"), dict):  # --abort-on ended the run early
        meta.append(f"<span class='note'>ABORTED: {html.escape(str(aborted.get('reason', '')))}</span>")
    if s.get("degraded"):
        meta.append("<span class='note'>DEGRADED: a worker was lost during the run</span>")
    lost = s.get("target_unreachable_since_s")
    if lost is not None:
        into = f", {lost - s['start_s']:.1f} s into the run" if s.get("start_s") is not None else ""
        meta.append(
            f"<span class='note'>TARGET UNREACHABLE since {html.escape(str(s.get('target_unreachable_since')))}"
            f"{into}: every later request failed to connect</span>"
        )
    items = (
        "\n".join(
            f"<li class='{'untrusted' if not f.trusted else ''}'><span class='k'>{html.escape(f.kind)}</span> "
            f"{html.escape(f.text)}</li>"
            for f in found
        )
        or "<li>No findings.</li>"
    )
    notes = "".join(f"<p class='note'>Note: {html.escape(n)}.</p>" for n in data.notes)
    figures = "\n".join(
        f"<figure><img alt='{name}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        f"<figcaption>{html.escape(CAPTIONS.get(name, name))} ({name})</figcaption></figure>"
        for name, png in pngs.items()
    )
    failures = (s.get("total") or {}).get("failures") or {}
    failed = ", ".join(f"{k} {v}" for k, v in failures.items() if v) or "none"
    drain = drain_line(s)
    drain_text = f" The {drain[0].lower()}{drain[1:]}." if drain else ""
    messages = "".join(
        f"<li><span class='k'>{html.escape(outcome)}</span> {e['count']} &times; "
        f"<code>{html.escape(e['message'])}</code></li>"
        for outcome, kept in (s.get("errors") or {}).items()
        for e in kept
    )
    messages = (
        f"<p class='meta'>Error messages (the first distinct ones per outcome):</p><ul>{messages}</ul>"
        if messages
        else ""
    )
    gpu_section = (
        "<h2>GPUs</h2>\n" + _gpu_html(data) + "\n<p class='meta'>From dcgm-exporter (--gpu-metrics), "
        f"per stage after its warm-up. Rows in red: a GPU under {GPU_IDLE:.0%} while another worked.</p>"
        if data.gpus
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm report: {html.escape(data.name)}</title>
<style>{CSS}</style></head><body>
<h1>Capacity report</h1>
<p class="meta">{" &middot; ".join(meta)}</p>
{notes}
{_search_html(data)}<h2>Diagnosis</h2>
<ul class="findings">{items}</ul>
<h2>Workloads and request classes</h2>
{_table(table.header(s), table.workload_rows(s))}
{_goodput_html(s)}
{_prompt_cache_html(s)}
<h2>Stages</h2>
{_stage_html(data, found)}
<p class="meta">Failures by outcome (whole run): {html.escape(failed)}.{html.escape(drain_text)} Rows in red: a worker's CPU was over {cpu_limit():.0f}%,
the client was the bottleneck and those latencies are not trusted.</p>
{messages}
<h2>Confidence intervals (95%)</h2>
{_ci_html(s)}
{_conversations_html(data)}<h2>Client vs server</h2>
{_client_server_html(data) if data.snapshots else "<p class='note'>No server metrics: nothing to compare.</p>"}
{gpu_section}
<h2>Plots</h2>
{figures or "<p class='note'>No stage data: nothing to plot.</p>"}
<p class="meta">Generated by <code>swarm report</code> from summary.json, the request records,
server_metrics.jsonl and client_cpu.jsonl; re-render with <code>swarm report {html.escape(str(data.directory))}</code>.</p>
</body></html>
"""


def _ci_html(s: Mapping[str, Any]) -> str:
    """The 95% interval table; "—" and a footnote with the reason where the data gives none."""
    head, rows, notes = table.ci_table(s)
    foot = "".join(f"<br>{html.escape(n)}" for n in notes)
    return (
        _table(head, rows)
        + "\n<p class='meta'>QPS: overlapping batch means over the completions of each whole 0.5 s bin in "
        "the window (batches at least one mean E2E long), Student t with at least 4 degrees of freedom; "
        "percentiles: distribution-free order-statistic intervals (exact binomial ranks) read from the "
        "sketches, each bound widened to its sketch bin's edge (swarm/stats/confidence.py). "
        f"&mdash; where the data cannot give one:{foot or ' none here.'}</p>"
    )


def _prompt_cache_html(s: Mapping[str, Any]) -> str:
    """The share of prompt tokens the server said it served from its cache, per workload and stage."""
    found = table.prompt_cache_table(s)
    if found is None:
        return ""
    cache = s["total"]["prompt_cache"]
    return (
        "<p class='meta'>Prompt cache hits as the responses said them (<code>usage.prompt_tokens_details"
        ".cached_tokens</code>: llama.cpp always, vLLM with <code>--enable-prompt-tokens-details</code>): "
        f"{cache['cached_tokens']:,} of the {cache['prompt_tokens']:,} prompt tokens of the "
        f"{cache['requests']:,} requests that said; &ldquo;-&rdquo;: no request said.</p>\n"
        + _table(found[0], [[html.escape(c) for c in r] for r in found[1]])
    )


def _goodput_html(s: Mapping[str, Any]) -> str:
    g = (s.get("total") or {}).get("goodput")
    if not g:
        return ""
    return (
        f"<p class='meta'>Goodput: requests meeting every one of <code>{html.escape(str(g['slo']))}</code> "
        f"(--goodput; a failed request never does): good/s counts them as QPS does, good % is their share "
        "of the ok and failed requests outside warm-ups. Per stage: below.</p>"
    )


def write_report(directory: Path, slo: str | None = None) -> Path:
    """Render DIR/report.html, the PNGs beside it and DIR/stages.csv. Returns the HTML path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load_run(Path(directory))
    found = findings(data, slo)
    stage_table(data).to_csv(data.directory / STAGES_CSV, index=False)
    pngs = {}
    for name, fig in render_plots(data, found).items():
        pngs[name] = plots.png(fig)
        (data.directory / name).write_bytes(pngs[name])
        plt.close(fig)
    (data.directory / "diagnosis.json").write_text(
        json.dumps(
            [{"kind": f.kind, "stage": f.stage, "text": f.text, "trusted": f.trusted} for f in found],
            indent=2,
        )
        + "\n"
    )
    path = data.directory / REPORT
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(data, found, pngs), encoding="utf-8")
    tmp.replace(path)
    return path


# ---------------------------------------------------------------------------------------- CLI


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", help="a run's output directory (with summary.json and/or requests.parquet)")
    p.add_argument(
        "--slo",
        help="objectives for the highest-concurrency-meeting-SLO finding "
        "(default: the run's own --slo), e.g. ttft_p99<=800ms",
    )


def main(args: argparse.Namespace) -> int:
    from swarm.core.errors import UsageError

    directory = Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory")
    if not any((directory / n).exists() for n in ("summary.json", "requests.parquet", "records")):
        raise UsageError(f"{directory} holds no run (no summary.json, requests.parquet or records/)")
    if args.slo is not None:  # --slo "" too: refused as empty, not ignored
        from swarm.stats import slo

        slo.parse(args.slo)
    path = write_report(directory, args.slo)
    for f in json.loads((directory / "diagnosis.json").read_text()):
        print(("[not trusted] " if not f["trusted"] else "") + f["text"])
    print(f"swarm report: {path}")
    return 0
