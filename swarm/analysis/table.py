"""Plain-text results table from a summary.json dict (pure; used by `swarm run` and reports).

With --goodput the table has two more columns (good requests per second, and their share of the
ok + failed requests); below it, one line per stage (and the run) with the 95% intervals of QPS
and of TTFT/TPOT/E2E p50 and p99 (summary.json `ci`, swarm/stats/confidence.py) and the goodput,
each stage named as every label names it ("stage 1 (64 users)": swarm/core/units.py `stage_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.core.terminal import printable
from swarm.core.units import percent_text, seconds_text, stage_name
from swarm.stats.summary import CI_KEYS, Block, Summary, workload_block

COLUMNS = (
    ("workload", "workload"),
    ("requests", "req"),
    ("failed", "fail"),
    ("cancelled", "cancel"),
    ("qps", "QPS"),
    ("output_tok_s", "out tok/s"),
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("ttfa_p50", "TTFA p50"),
    ("tpot_p50", "TPOT p50"),
    ("itl_p99", "ITL p99"),
    ("e2e_p50", "E2E p50"),
    ("e2e_p99", "E2E p99"),
)


def _latency(block: Block | Mapping[str, Any], metric: str, stat: str) -> str:
    """Seconds as "85ms" below 10 s, "12.3s" from there; "-" when there is none."""
    return seconds_text((block.get(f"{metric}_s") or {}).get(stat))


GOODPUT_COLUMNS = (("goodput_rate", "good/s"), ("goodput_share", "good %"))
# (key, title) of the latency percentiles both the interval block and `--repeat` show
LATENCY_COLUMNS = (
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("tpot_p50", "TPOT p50"),
    ("tpot_p99", "TPOT p99"),
    ("e2e_p50", "E2E p50"),
    ("e2e_p99", "E2E p99"),
)
CI_COLUMNS = (("qps", "QPS [95% CI]"), *LATENCY_COLUMNS)


def has_goodput(summary: Summary | Mapping[str, Any]) -> bool:
    return bool((summary.get("total") or {}).get("goodput"))


def header(summary: Summary | Mapping[str, Any]) -> list[str]:
    """The table's column titles (the goodput ones only when the run had --goodput)."""
    cols = [*COLUMNS, *(GOODPUT_COLUMNS if has_goodput(summary) else ())]
    return [title for _, title in cols]


def goodput_cells(block: Block | Mapping[str, Any]) -> list[str]:
    g = block.get("goodput") or {}
    share = g.get("share")
    return [f"{g.get('rate', 0.0):.2f}" if g else "-", "-" if share is None else f"{share * 100:.1f}%"]


def _lat(v: float | None) -> str:
    return seconds_text(v, ms_digits=1 if v is not None and v < 0.1 else 0)


def interval_text(block: Block | Mapping[str, Any], key: str, notes: Mapping[str, int] | None = None) -> str:
    """`12.30 [11.90, 12.70]` (QPS) or `85ms [83ms, 88ms]`; `85ms —` where summary.json gives a
    reason for no interval (`85ms — [2]` with `notes`: reason -> its footnote number); the value
    alone without either."""
    ci_block = block.get("ci") or {}
    ci = ci_block.get(key)
    if key == "qps":
        value, bounds = f"{block.get('qps', 0.0):.2f}", (lambda v: f"{v:.2f}")
    else:
        metric, stat = key.split("_")
        value, bounds = _lat((block.get(f"{metric}_s") or {}).get(stat)), _lat
    if ci:
        return f"{value} [{bounds(ci[0])}, {bounds(ci[1])}]"
    reason = (ci_block.get("reasons") or {}).get(key)
    if reason is None:
        return value
    return f"{value} —" if notes is None or reason not in notes else f"{value} — [{notes[reason]}]"


def ci_table(
    summary: Summary | Mapping[str, Any],
) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, footnotes): one row per stage (its `total`), then the run's total, with each
    interval ("—" and a footnote number where there is none, the footnote its reason) and, with
    --goodput, the goodput (good/s, share)."""
    good = has_goodput(summary)
    head = ["stage", *(t for _, t in CI_COLUMNS), *(t for _, t in GOODPUT_COLUMNS if good)]
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for st in summary.get("stages") or []:
        # open loop: the load is the rate (the users only cap what is in flight)
        if st.get("rate") is not None:
            load = f" ({st['rate']:g} req/s)"
        else:
            load = f" ({st['users']} users)" if st.get("users") is not None else ""
        entries.append((f"{stage_name(st['stage'])}{load}", st.get("total") or {}))
    if (total := workload_block(summary, "total")) is not None:
        entries.append(("run", total))
    notes: dict[str, int] = {}
    for _, b in entries:
        for k, _ in CI_COLUMNS:
            ci_block = b.get("ci") or {}
            reason = (ci_block.get("reasons") or {}).get(k)
            if reason is not None and not ci_block.get(k):
                notes.setdefault(reason, len(notes) + 1)
    rows = [
        [name, *(interval_text(b, k, notes) for k, _ in CI_COLUMNS), *(goodput_cells(b) if good else ())]
        for name, b in entries
    ]
    return head, rows, [f"[{n}] {reason}" for reason, n in notes.items()]


def ci_rows(summary: Summary | Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of `ci_table`, without the footnotes."""
    head, rows, _ = ci_table(summary)
    return head, rows


def align(head: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to width: the first left-aligned, the rest right-aligned; a rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(head), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def row(name: str, block: Block | Mapping[str, Any]) -> list[str]:
    failed = sum((block.get("failures") or {}).values())
    cells = [
        name,
        str(block.get("requests", 0)),
        str(failed),
        str(block.get("cancelled", 0)),
        f"{block.get('qps', 0.0):.2f}",
        f"{block.get('output_tok_s', 0.0):.0f}",
    ]
    for key, _ in COLUMNS[6:]:
        metric, stat = key.split("_")
        cells.append(_latency(block, metric, stat))
    if block.get("goodput"):
        cells.extend(goodput_cells(block))
    return cells


def workload_rows(summary: Summary | Mapping[str, Any]) -> list[list[str]]:
    """One row per workload, its request classes right under it (when it has several), `total`, then
    one row per served model under the total when the run split its traffic (`--model a:3,b:1`), and
    one per endpoint when it went to several (`--host URL1,URL2`)."""
    rows = []
    for n in (n for n in summary.get("workloads", []) if n != "total"):
        if (block := workload_block(summary, n)) is None:
            continue
        rows.append(row(n, block))
        classes = (summary.get("classes") or {}).get(n) or {}
        if len(classes) > 1:  # each class beside the workload's total
            rows.extend(row(f"  {n}/{k}", b) for k, b in sorted(classes.items()))
    if (total := workload_block(summary, "total")) is not None:
        rows.append(row("total", total))
    models = summary.get("models") or {}
    if len(models) > 1:  # each served model beside the total
        rows.extend(row(f"  model {m or '(none)'}", b) for m, b in sorted(models.items()))
    endpoints = summary.get("endpoints") or {}
    if len(endpoints) > 1:  # each endpoint beside the total
        rows.extend(row(f"  endpoint {e or '(none)'}", b) for e, b in sorted(endpoints.items()))
    return rows


def render(summary: Summary | Mapping[str, Any]) -> str:
    """The per-workload table, `total` last, then the drain after the stop and a failure breakdown
    when there are any."""
    lines = align(header(summary), workload_rows(summary))
    if (g := (summary.get("total") or {}).get("goodput")) is not None:
        lines.append(f"goodput: requests meeting every one of {g['slo']} (good/s counts them as QPS does)")
    lines.extend(open_loop_lines(summary))
    if drain := drain_line(summary):
        lines.append(drain)
    failures = (summary.get("total") or {}).get("failures") or {}
    if any(failures.values()):
        parts = ", ".join(f"{k}={v}" for k, v in sorted(failures.items()) if v)
        lines.append(f"failures by outcome: {parts}")
    if cut := cancel_line(summary):
        lines.append(cut)
    lines.extend(session_lines(summary))
    lines.extend(agent_lines(summary))
    lines.extend(prompt_cache_lines(summary))
    if intended := intended_prefix_line(summary):
        lines.append(intended)
    if isinstance(aborted := summary.get("aborted"), Mapping) and aborted.get("reason"):
        lines.append(str(aborted["reason"]))  # --abort-on ended the run: "aborted: ..."
    return "\n".join(printable(line) for line in lines)  # (model names come from the target)


def render_ci(summary: Summary | Mapping[str, Any]) -> str | None:
    """The 95% intervals per stage and for the run, as text under the table (`swarm run` prints it),
    each missing one's reason as a footnote; None when no block has any interval (too short a run)."""
    if not any(ci for b in _ci_blocks(summary) for k, ci in (b.get("ci") or {}).items() if k in CI_KEYS):
        return None
    head, body, notes = ci_table(summary)
    return "\n".join(
        [
            "95% confidence intervals (QPS: overlapping batch means over completions per 0.5 s; "
            "percentiles: order statistics, widened to the sketch's bins)",
            *align(head, body),
            *notes,
        ]
    )


def _ci_blocks(summary: Summary | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [st.get("total") or {} for st in summary.get("stages") or []] + [summary.get("total") or {}]


def open_loop_lines(summary: Summary | Mapping[str, Any]) -> list[str]:
    """Each open-loop stage's rate asked against the rate it sent, with how late its requests left
    (send lag p50/p99/max): the load the server got, beside the one asked for (issue 40)."""
    out = []
    for st in summary.get("stages") or []:
        rate, sent = st.get("rate"), st.get("sent_rate")
        if rate is None or sent is None:
            continue
        lag = (st.get("total") or {}).get("send_lag_s") or {}
        lags = "/".join("-" if lag.get(k) is None else f"{lag[k] * 1000:.1f}" for k in ("p50", "p99", "max"))
        out.append(
            f"open loop, {stage_name(st['stage'])}: asked {rate:g} req/s, sent {sent:.1f} req/s; "
            f"send lag p50/p99/max {lags} ms"
        )
    return out


def drain_line(summary: Summary | Mapping[str, Any]) -> str | None:
    """What happened after the stop began, apart from the load's rates; None when nothing did."""
    d = summary.get("drain") or {}
    if not d.get("requests") and not d.get("cancelled"):
        return None
    took = d.get("duration_s")
    during = f" in the {took:.1f} s after the stop" if took is not None else " after the stop"
    return (
        f"drain: {d.get('requests', 0)} requests finished{during} (not in QPS); "
        f"{d.get('cancelled', 0)} cancelled by the stop"
    )


def cancel_line(summary: Summary | Mapping[str, Any]) -> str | None:
    """Requests whose client hung up on purpose (--cancel), in the run and per stage; None when none."""
    n = int((summary.get("total") or {}).get("cancelled_by_client") or 0)
    if not n:
        return None
    sent = int((summary.get("total") or {}).get("requests") or 0)
    stages = summary.get("stages") or []
    per_stage = ", ".join(
        f"{stage_name(st['stage'])}: {int((st.get('total') or {}).get('cancelled_by_client') or 0)}"
        for st in stages
    )
    share = f" ({n / sent * 100:.1f}%)" if sent else ""
    return (
        f"cancelled by the client (--cancel): {n} of {sent} requests{share}"
        + (f"; per stage: {per_stage}" if len(stages) > 1 else "")
        + " (not in the latencies, not failures)"
    )


def intended_prefix_line(summary: Summary | Mapping[str, Any]) -> str | None:
    """The prefix-cache hit share the workload's design implies (--shared-prefix-tokens, rag's
    prefix, a trace's hash ids; 0 with --prefix-cache bust), to read beside the server's own (the
    table above; the report sets the server's prefix-cache counter beside it too); None without one."""
    shares = summary.get("intended_prefix_share") or {}
    if not shares:
        return None
    meant = ", ".join(f"{k} {v * 100:.1f}%" for k, v in sorted(shares.items()))
    bust = " (--prefix-cache bust: every prefix unique)" if summary.get("prefix_cache_mode") == "bust" else ""
    return f"prefix-cache hit share the design implies: {meant}{bust}"


def session_lines(summary: Summary | Mapping[str, Any]) -> list[str]:
    """Conversations (chat_session): started and cut, requests in flight beside the user count, and
    per turn: requests, mean prompt tokens, TTFT p50/p99. Empty without conversations."""
    s = summary.get("sessions")
    if not s:
        return []
    flight = s.get("in_flight_mean")
    flight_text = f"{flight:.1f}" if flight is not None else "-"
    lines = [
        f"conversations: {s.get('started', 0)} started, {s.get('cut_at_max_model_len', 0)} cut at max_model_len; "
        f"{summary.get('users', 0)} users (sessions), {flight_text} requests in flight on average "
        "(think time is not load)"
    ]
    for key, b in (s.get("turns") or {}).items():
        prompt = b.get("prompt_tokens_mean")
        lines.append(
            f"  turn {key:<2}  {b.get('requests', 0):>6} req  prompt {prompt if prompt is None else round(prompt)} tok  "
            f"TTFT p50 {_latency(b, 'ttft', 'p50')}  p99 {_latency(b, 'ttft', 'p99')}"
        )
    return lines


def agent_lines(summary: Summary | Mapping[str, Any]) -> list[str]:
    """Agent tasks: tasks and steps, the task's time and the time to the first tool-call token,
    tool calls valid / invalid (with their reasons) / none under required, the task goodput under
    a task SLO. Empty without agent steps."""
    total = summary.get("total") or {}
    t = total.get("tools")
    if not t:
        return []
    steps = t.get("steps", 0)
    tasks = t.get("tasks", 0)
    per_task = f"{steps / tasks:.1f}" if tasks else "-"
    lines = [
        f"agent: {tasks} tasks, {steps} steps ({per_task} a task); task p50 {_latency(total, 'task', 'p50')} "
        f"p90 {_latency(total, 'task', 'p90')} p99 {_latency(total, 'task', 'p99')}; first tool-call token "
        f"p50 {_latency(total, 'ttftc', 'p50')} p99 {_latency(total, 'ttftc', 'p99')}",
    ]
    reasons = ", ".join(f"{k}={v}" for k, v in (t.get("reasons") or {}).items())
    lines.append(
        f"  tool calls: {t.get('calls', 0)}, {t.get('valid', 0)} valid, {t.get('invalid', 0)} invalid; "
        f"{t.get('none_when_required', 0)} steps without a call under required"
        + (f" ({reasons})" if reasons else "")
    )
    if (g := t.get("task_goodput")) is not None:
        share = g.get("share")
        lines.append(
            f"  task goodput: {g.get('met', 0)} of {g.get('tasks', 0)} tasks within "
            f"{_lat(g.get('bound_s'))} ({'-' if share is None else percent_text(share, 1)})"
        )
    return lines


def cache_share_text(block: Block | Mapping[str, Any] | None) -> str:
    """A block's client-side cache-hit share ("48.2%"), "-" when no request reported cached tokens."""
    cache = (block or {}).get("prompt_cache")
    share = cache.get("hit_share") if cache else None
    return "-" if share is None else f"{share * 100:.1f}%"


def prompt_cache_table(summary: Summary | Mapping[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows): the share of prompt tokens the server said it served from its cache, one row
    per workload and the total, one column for the run and one per stage ("-": not reported); None
    when no request of the run reported cached tokens (summary.json `prompt_cache`)."""
    if not (summary.get("total") or {}).get("prompt_cache"):
        return None
    stages = summary.get("stages") or []
    head = ["workload", "run", *(stage_name(st["stage"]) for st in stages)]
    names = [n for n in summary.get("workloads", []) if n != "total"] + ["total"]
    rows = [
        [n, cache_share_text(workload_block(summary, n)), *(cache_share_text(st.get(n)) for st in stages)]
        for n in names
    ]
    return head, rows


def prompt_cache_lines(summary: Summary | Mapping[str, Any]) -> list[str]:
    """The cache-hit share table under a title, with the token counts of the run; empty when no
    request reported cached tokens."""
    found = prompt_cache_table(summary)
    if found is None:
        return []
    cache = summary["total"]["prompt_cache"]
    return [
        f"prompt cache hits (the server's cached_tokens over the prompt tokens of the requests that said: "
        f"{cache['cached_tokens']:,} of {cache['prompt_tokens']:,} tokens, {cache['requests']:,} requests):",
        *align(*found),
    ]
