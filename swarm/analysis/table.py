"""Plain-text results table from a summary.json dict (pure; used by `swarm run` and reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.core.units import seconds_text
from swarm.stats.summary import Block, Summary, workload_block

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
    return cells


def workload_rows(summary: Summary | Mapping[str, Any]) -> list[list[str]]:
    """One row per workload, its request classes right under it (when it has several), `total`, then
    one row per served model under the total when the run split its traffic (`--model a:3,b:1`)."""
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
    return rows


def render(summary: Summary | Mapping[str, Any]) -> str:
    """The per-workload table, `total` last, then the drain after the stop and a failure breakdown
    when there are any."""
    rows = workload_rows(summary)
    header = [title for _, title in COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [
        "  ".join(
            h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
    if drain := drain_line(summary):
        lines.append(drain)
    failures = (summary.get("total") or {}).get("failures") or {}
    if any(failures.values()):
        parts = ", ".join(f"{k}={v}" for k, v in sorted(failures.items()) if v)
        lines.append(f"failures by outcome: {parts}")
    lines.extend(session_lines(summary))
    return "\n".join(lines)


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
