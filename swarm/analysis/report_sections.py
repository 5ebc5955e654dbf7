"""The report's sections, each an HTML fragment from a loaded run (`RunData`): the stage table,
client vs server, GPUs, the search, conversations, the confidence intervals, the prompt cache and
goodput notes. Empty where the run has no data for one.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from swarm.analysis import conversations, plots, table
from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.gpu_diagnosis import GPU_ACTIVE, GPU_IDLE
from swarm.analysis.report_cells import fmt, table_html
from swarm.analysis.rundir import RunData
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.server_families import Family
from swarm.core.server_families import family as family_of
from swarm.core.units import stage_name, stage_number

ABSENT = "absent"  # a server figure the target's family does not expose (never shown as 0 or "-")


def stage_html(data: RunData, found: Sequence[Finding]) -> str:
    untrusted = {f.stage for f in found if not f.trusted and f.kind in ("client_bound", "late_sends")}
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
    open_loop = any(r.rate is not None for r in data.rows)
    if open_loop:  # the load asked for beside the load sent, and how late it left (issue 40)
        header[2:2] = ["rate asked req/s", "sent req/s", "send lag p99 ms", "send lag max ms"]
    rows, classes = [], []
    fam = family_of(data.source)
    for r in data.rows:
        s = data.server.get(r.stage)
        users = "-" if r.users is None else f"{'~' if data.users_estimated else ''}{r.users}"
        offered = (
            [
                "-" if r.rate is None else f"{r.rate:g}",
                fmt(r.sent_rate),
                fmt(r.send_lag_p99, "ms"),
                fmt(r.send_lag_max, "ms"),
            ]
            if open_loop
            else []
        )
        rows.append(
            [
                str(stage_number(r.stage)),
                users,
                *offered,
                fmt(r.requests, "int"),
                fmt(r.failures, "int"),
                fmt(r.cancelled, "int"),
                fmt(r.qps),
                fmt(r.output_tok_s),
                fmt(r.ttft_p50, "ms"),
                fmt(r.ttft_p99, "ms"),
                "-" if r.e2e_p50 is None else f"{r.e2e_p50:.2f}",
                "-" if r.e2e_p99 is None else f"{r.e2e_p99:.2f}",
                fmt(r.tpot_p50, "ms"),
                fmt(r.itl_p99, "ms"),
                *_server_cells(s, fam),
                "-" if cpu.get(r.stage) is None else f"{cpu[r.stage]:.0f}%",
            ]
        )
        classes.append("untrusted" if r.stage in untrusted else "")
    return table_html(header, rows, classes)


def _server_cells(s: StageServerStats | None, fam: Family) -> list[str]:
    """The stage table's server columns: "-" without server statistics, "absent" where the
    family exposes no such figure."""

    def pair(a: Any, b: Any, kind: str = "") -> str:
        return "-" if a is None and b is None else f"{fmt(a, kind)} / {fmt(b, kind)}"

    if s is None:
        return ["-"] * 6
    cells = {
        "running": pair(s.running_mean, s.running_max),
        "waiting": pair(s.waiting_mean, s.waiting_max),
        "kv_usage": pair(s.kv_mean, s.kv_max, "pct"),
        "preemptions": fmt(s.preemptions, "int"),
        "prefix_hits": fmt(s.prefix_hit_rate, "pct"),
        "generation_tokens": fmt(s.generation_tok_s),
    }
    return [ABSENT if fam.lacks(name) else text for name, text in cells.items()]


def _bucket_text(v: float | None, bucket: tuple[float, float] | None) -> str:
    """A server percentile with the histogram bucket it was interpolated in: "1666 (1000-2500)"."""
    if v is None:
        return "-"
    if bucket is None:
        return fmt(v, "ms")
    hi = "+Inf" if bucket[1] == float("inf") else f"{bucket[1] * 1000:.0f}"
    return f"{fmt(v, 'ms')} ({bucket[0] * 1000:.0f}-{hi})"


CLIENT_SERVER_HEADER = (
    "stage", "users", "requests client / server", "TTFT mean client", "server", "gap", "TTFT p50 client",
    "server (bucket)", "TTFT p99 client", "server (bucket)", "server queue p50/p99", "server ITL p50/p99",
    "server E2E p50/p99", "client ok", "server finished", "client out tok", "server gen tok", "finish reasons",
)  # fmt: skip

CLIENT_SERVER_NOTE = (
    "<p class='meta'>Times in ms. TTFT on the same requests: the server observes a request's TTFT "
    "when its engine makes the first token, so the client's records are taken here by the time "
    "they received their first token, inside the server's window (its two scrapes), not by the "
    "stage they were sent in; 'requests' shows both sides counted the same ones. The means are "
    "exact on both sides (a histogram's sum and count), so their gap is the time between the "
    "engine and the client: the HTTP front-end, the network and the client. Server percentiles "
    "are interpolated inside a histogram bucket (in brackets, ms): the true value is anywhere in "
    "it (each server has its own buckets: vLLM's TTFT buckets are 0.25-2.5 s wide above 0.1 s), so "
    "compare the client's percentile "
    "with the bucket, not with the interpolated figure. The rest of the row (queue, ITL, E2E, "
    "counts) is per stage window, finished requests by the window they finished in.</p>"
)


def client_server_html(data: RunData) -> str:
    """One row per stage, client against server: TTFT on the same requests, the server's latencies
    and counts; then speculative decoding where the server reported it."""
    fam = family_of(data.source)
    rows = [
        _client_server_row(r, data.server.get(r.stage), data.ttft_pairs.get(r.stage), fam) for r in data.rows
    ]
    return table_html(CLIENT_SERVER_HEADER, rows) + CLIENT_SERVER_NOTE + _speculative_html(data)


def _same_requests_cells(cmp: TtftComparison | None, fam: Family) -> list[str]:
    """Client and server TTFT on the same requests: counts, means and their gap, p50 and p99 (the
    server's "absent" where its family has no TTFT histogram, TGI)."""
    if cmp is None:
        if fam.lacks("ttft"):  # the client's side not compared ("-"), the server's absent
            return ["-", "-", ABSENT, ABSENT, "-", ABSENT, "-", ABSENT]
        return ["-"] * 8
    c, v = cmp.client, cmp.server
    return [
        f"{c.count:,.0f} / {v.count:,.0f}" + ("" if cmp.same_requests else " (not the same)"),
        fmt(c.mean, "ms"),
        fmt(v.mean, "ms"),
        fmt(cmp.mean_gap, "ms"),
        fmt(c.quantiles.get("p50"), "ms"),
        _bucket_text(v.quantiles.get("p50"), v.buckets.get("p50")),
        fmt(c.quantiles.get("p99"), "ms"),
        _bucket_text(v.quantiles.get("p99"), v.buckets.get("p99")),
    ]


def _client_server_row(
    r: StageRow, s: StageServerStats | None, cmp: TtftComparison | None, fam: Family
) -> list[str]:
    lat = s.latency if s else {}

    def srv(lacks: bool, text: str | None) -> str:
        return "-" if s is None or text is None else ABSENT if lacks else text

    def pq(key: str, kind: str = "ms") -> str:
        d = lat.get(key) or {}
        return srv(fam.lacks(key), "-" if not d else f"{fmt(d.get('p50'), kind)} / {fmt(d.get('p99'), kind)}")

    e2e = lat.get("e2e")
    reasons = ", ".join(f"{k} {v:,.0f}" for k, v in s.finish_reasons.items()) if s else ""
    return [
        str(stage_number(r.stage)),
        "-" if r.users is None else str(r.users),
        *_same_requests_cells(cmp, fam),
        pq("queue"),
        pq("itl"),
        srv(fam.lacks("e2e"), "-" if not e2e else f"{e2e['p50'] or 0:.2f} / {e2e['p99'] or 0:.2f} s"),
        fmt(r.requests - r.failures - r.cancelled - r.cancelled_by_client, "int"),
        srv(fam.name != "unknown" and not fam.success, fmt(s.requests, "int") if s else None),
        fmt(r.output_tokens, "int"),
        srv(fam.lacks("generation_tokens"), fmt(s.generation_tokens, "int") if s else None),
        srv(fam.name != "unknown" and fam.reason_label is None, html.escape(reasons)),
    ]


def _speculative_html(data: RunData) -> str:
    """The acceptance rate and length per stage, where the server reported speculative decoding."""
    spec = [
        r
        for r in data.rows
        if data.server.get(r.stage) and data.server[r.stage].spec_acceptance_rate is not None
    ]
    if not spec:
        return ""
    return "<h3>Speculative decoding</h3>" + table_html(
        ["stage", "users", "acceptance rate", "mean acceptance length"],
        [
            [
                str(stage_number(r.stage)),
                str(r.users),
                fmt(data.server[r.stage].spec_acceptance_rate, "pct"),
                f"{data.server[r.stage].spec_mean_acceptance_length or 0:.2f}",
            ]
            for r in spec
        ],
    )


GPU_HEADER = (
    "Stage", "GPU", "Model", "Util mean", "Util max", "SM active", "Memory used max (GiB)",
    "Power mean / max (W)", "Temp max (°C)", "Scrapes",
)  # fmt: skip


def gpu_html(data: RunData) -> str:
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
                    fmt(g.model),
                    fmt(g.util_mean, "pct"),
                    fmt(g.util_max, "pct"),
                    fmt(g.sm_active_mean, "pct"),
                    used,
                    f"{fmt(g.power_mean_w)} / {fmt(g.power_max_w)}",
                    fmt(g.temp_max_c),
                    fmt(g.samples, "int"),
                ]
            )
            classes.append("untrusted" if busy and (g.util_mean or 0.0) < GPU_IDLE else "")
    return table_html(GPU_HEADER, rows, classes)


def search_html(data: RunData) -> str:
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
    meant = ", ".join(f"{html.escape(k)} {fmt(v, 'pct')}" for k, v in sorted(intended.items()))
    return [f"prefix cache: server hit rate {fmt(server, 'pct')} (intended shared prefix: {meant})"]


def conversations_html(data: RunData) -> str:
    """chat_session runs: users vs requests in flight, TTFT and prompt tokens by turn, and the
    server's prefix-cache hit rate over time. Empty for runs without conversations."""
    sessions = data.summary.get("sessions")
    if not sessions:
        return ""
    turns = table_html(
        ["turn", "requests", "ok", "prompt tokens (mean)", "TTFT p50 (ms)", "TTFT p99 (ms)"],
        [
            [html.escape(k), fmt(n, "int"), fmt(ok, "int"), fmt(prompt), fmt(p50, "ms"), fmt(p99, "ms")]
            for k, n, ok, prompt, p50, p99 in conversations.turn_rows(data.summary)
        ],
    )
    hits = conversations.prefix_hit_over_time(data.snapshots, plots.run_start(data))
    hit_table = (
        table_html(
            ["from s", "to s", "server prefix-cache hit rate"],
            [[f"{a:.0f}", f"{b:.0f}", fmt(rate, "pct")] for a, b, rate in hits],
        )
        if hits
        else "<p class='note'>No prefix-cache counters in the server's metrics.</p>"
    )
    flight = sessions.get("in_flight_mean")
    return (
        "<h2>Conversations</h2>\n"
        f"<p class='meta'>{fmt(sessions.get('started'), 'int')} conversations started, "
        f"{fmt(sessions.get('cut_at_max_model_len'), 'int')} cut at max_model_len; "
        f"{fmt(data.summary.get('users'), 'int')} users (one conversation each at a time) kept "
        f"{fmt(flight)} requests in flight on average: think time is not load.</p>\n"
        f"{turns}\n<p class='meta'>Prefix-cache hit rate over time (the server's counters):</p>\n{hit_table}\n"
    )


def agents_html(s: Mapping[str, Any]) -> str:
    """Agent runs (--workload agent): per workload with agent steps, its tasks and steps, the task's
    time and the time to the first tool-call token, the tool calls' validity, the task goodput
    under a task SLO. Empty without agent steps."""
    rows = []
    for name in ("total", *(s.get("workloads") or [])):
        b = s.get(name) or {}
        t = b.get("tools")
        if not t or (name == "total" and len(s.get("workloads") or []) == 1):
            continue
        task, ttftc = b.get("task_s") or {}, b.get("ttftc_s") or {}
        reasons = ", ".join(f"{k}={v}" for k, v in (t.get("reasons") or {}).items()) or "-"
        g = t.get("task_goodput") or {}
        rows.append(
            [
                html.escape(name),
                fmt(t.get("tasks"), "int"),
                fmt(t.get("steps"), "int"),
                fmt(t["steps"] / t["tasks"] if t.get("tasks") else None),
                fmt(task.get("p50"), "ms"),
                fmt(task.get("p90"), "ms"),
                fmt(task.get("p99"), "ms"),
                fmt(ttftc.get("p50"), "ms"),
                fmt(ttftc.get("p99"), "ms"),
                fmt(t.get("calls"), "int"),
                fmt(t.get("valid"), "int"),
                fmt(t.get("invalid"), "int"),
                fmt(t.get("none_when_required"), "int"),
                html.escape(reasons),
                fmt(g.get("share"), "pct"),
            ]
        )
    if not rows:
        return ""
    head = [
        "workload", "tasks", "steps", "steps a task", "task p50 (ms)", "task p90 (ms)", "task p99 (ms)",
        "first tool-call token p50 (ms)", "p99 (ms)", "tool calls", "valid", "invalid",
        "no call under required", "reasons", "task goodput",
    ]  # fmt: skip
    return (
        "<h2>Agents</h2>\n<p class='meta'>Tasks of tool-calling steps: a task's time runs from its first "
        "step's send to its last step's end (its steps' E2E and the tools' time between them); a call is "
        "valid when its arguments are a JSON object with the tool's required fields; task goodput: the "
        "tasks within the task SLO's bound (--slo task_pNN&lt;=T).</p>\n" + table_html(head, rows) + "\n"
    )


def ci_html(s: Mapping[str, Any]) -> str:
    """The 95% interval table; "—" and a footnote with the reason where the data gives none."""
    head, rows, notes = table.ci_table(s)
    foot = "".join(f"<br>{html.escape(n)}" for n in notes)
    return (
        table_html(head, rows)
        + "\n<p class='meta'>QPS: overlapping batch means over the completions of each whole 0.5 s bin in "
        "the window (batches at least one mean E2E long), Student t with at least 4 degrees of freedom; "
        "percentiles: distribution-free order-statistic intervals (exact binomial ranks) read from the "
        "sketches, each bound widened to its sketch bin's edge (swarm/stats/confidence.py). "
        f"&mdash; where the data cannot give one:{foot or ' none here.'}</p>"
    )


def prompt_cache_html(s: Mapping[str, Any]) -> str:
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
        + table_html(found[0], [[html.escape(c) for c in r] for r in found[1]])
    )


def goodput_html(s: Mapping[str, Any]) -> str:
    g = (s.get("total") or {}).get("goodput")
    if not g:
        return ""
    return (
        f"<p class='meta'>Goodput: requests meeting every one of <code>{html.escape(str(g['slo']))}</code> "
        f"(--goodput; a failed request never does): good/s counts them as QPS does, good % is their share "
        "of the ok and failed requests outside warm-ups. Per stage: below.</p>"
    )
