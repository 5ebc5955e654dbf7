"""A `--search` run in the report: every probed point, the bracket narrowing, the answer and why.

Reads summary.json `search` (written by the master, swarm/live/search.py) and the per-stage
server statistics (swarm/analysis/server_metrics.py) for the bottleneck at the answer: the first
failing probe for a concurrency/rate search (what stopped the SLO being met), the knee's stage for
a knee search, judged by the diagnosis' own tests (swarm/analysis/bottleneck.py) and said in the
diagnosis' own sentence for that finding (written once, there: no kind label in front of it).
Probes are stages, so the probe table and plot number them as every label numbers stages
(swarm/core/units.py `stage_name`: from 1).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from swarm.analysis.bottleneck import cause_at
from swarm.analysis.finding import Finding
from swarm.analysis.rundir import RunData
from swarm.core.units import seconds_text, stage_name, stage_number


def search_of(data: RunData) -> Mapping[str, Any] | None:
    s = data.summary.get("search")
    return s if isinstance(s, Mapping) else None


def why_stage(search: Mapping[str, Any]) -> int | None:
    """The stage whose server state explains the answer (see the module doc)."""
    lo, hi = (search.get("bracket") or [None, None])[:2]
    target = hi if hi is not None else lo
    for p in search.get("probes") or []:
        if p.get("load") == target:
            return int(p["stage"])
    return None


def bottleneck(data: RunData) -> Finding | None:
    """What held the server at the answer (the client's CPU, KV cache, the scheduler cap, the
    front-end, outside the engine, compute: `bottleneck.cause_at`), as the diagnosis finding of that
    kind: its `text` is the one sentence for it, its `kind` says which."""
    search = search_of(data)
    if search is None:
        return None
    stage = why_stage(search)
    if stage is None:
        return None
    row = next((r for r in data.rows if r.stage == stage), None)
    s = data.server.get(stage) if data.server else None
    if row is None or s is None or not s.samples:
        return Finding(
            "no_server_metrics",
            stage,
            f"No server metrics for {stage_name(stage)}: the cause (KV cache, scheduler cap, compute) "
            "cannot be told.",
        )
    rows = sorted(data.rows, key=lambda r: (r.users or 0, r.stage))
    return cause_at(rows, data.server, stage, source=data.source, ttft_pairs=data.ttft_pairs, cpu=data.cpu)


def _probe_number(probe: Mapping[str, Any], order: int) -> int:
    """The probe's stage as labels number it; its order (from 1) for a file whose probes lack `stage`."""
    return stage_number(probe["stage"]) if probe.get("stage") is not None else order


def settled_text(entry: Mapping[str, Any]) -> str:
    """'settled after 6 s' / 'unsettled (30 s)' for a probe or stage entry that says; else ''."""
    settled = entry.get("settled")
    if settled is None:
        return ""
    took = entry.get("settle_s", entry.get("warmup_s"))
    took_s = "" if took is None else f"{float(took):.0f} s"
    return f"settled after {took_s}" if settled else f"unsettled ({took_s}: its figures are no verdict)"


def _num(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) and v != int(v) else f"{int(v)}"


def html_section(data: RunData) -> str:
    """The report's "Search" section: answer, why, probes in order with the bracket after each."""
    search = search_of(data)
    if search is None:
        return ""
    head = html.escape(str(search.get("headline") or ""))
    why = bottleneck(data)
    unit = html.escape(str(search.get("unit") or ""))
    rows = []
    for i, p in enumerate(search.get("probes") or [], 1):
        verdict = "inconclusive" if p.get("ok") is None else ("pass" if p["ok"] else "fail")
        if search.get("mode") == "knee":
            verdict = "-"
        lo, hi = (p.get("bracket") or [None, None])[:2]
        values = ", ".join(
            f"{k} = {seconds_text(v) if v is not None and not k.startswith(('error', 'goodput', 'qps')) else _num(v)}"
            for k, v in (p.get("values") or {}).items()
        )
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(c)}</td>"
                for c in (
                    str(_probe_number(p, i)),
                    f"{_num(p.get('load'))} {unit}",
                    verdict,
                    "-" if p.get("qps") is None else f"{p['qps']:.1f}",
                    "-" if p.get("ttft_p99") is None else f"{p['ttft_p99'] * 1000:.0f} ms",
                    values or "-",
                    f"{p.get('duration_s', 0):.0f} s",
                    settled_text(p),
                    str(p.get("ended_by") or ""),
                    f"{_num(lo)} - {_num(hi)}",
                )
            )
            + "</tr>"
        )
    header = "".join(
        f"<th>{h}</th>"
        for h in (
            "stage",
            "load",
            "verdict",
            "QPS",
            "TTFT p99",
            "measured",
            "stage time",
            "settling",
            "ended by",
            "bracket after",
        )
    )
    crit = html.escape(str(search.get("criterion") or ""))
    return (
        f"<p><b>{head}</b></p>"
        + (f"<p>Why: {html.escape(why.text)}</p>" if why else "")
        + f"<p class='meta'>criterion: {crit}; precision ±{float(search.get('precision') or 0) * 100:g}%; "
        f"status {html.escape(str(search.get('status')))}; {len(search.get('probes') or [])} probes in "
        f"{_num(search.get('duration_s'))} s (budget {_num(search.get('budget_s'))} s).</p>"
        f"<table><tr>{header}</tr>{''.join(rows)}</table>"
    )


def plot(data: RunData, plt: Any) -> Any | None:
    """Probed loads in order (pass/fail) and the bracket narrowing, one figure."""
    search = search_of(data)
    probes = list((search or {}).get("probes") or [])
    if not probes:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    knee = search.get("mode") == "knee"  # type: ignore[union-attr]
    xs = [p["load"] for p in probes]
    ys = [(p.get("qps") if knee else (p.get("ttft_p99") or 0) * 1000) for p in probes]
    colours = ["C0" if knee else ("C2" if p.get("ok") else "C3") for p in probes]
    a1.scatter(xs, [y if y is not None else float("nan") for y in ys], c=colours, zorder=3)
    for i, (p, x, y) in enumerate(zip(probes, xs, ys, strict=True), 1):
        if y is not None:
            a1.annotate(
                str(_probe_number(p, i)), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8
            )
    unit = search.get("unit")  # type: ignore[union-attr]
    a1.set(
        title="Probed points (numbered by stage" + ("" if knee else "; green pass, red fail") + ")",
        xlabel=str(unit),
        ylabel="QPS" if knee else "TTFT p99 (ms)",
    )
    a1.grid(True, alpha=0.3)
    n = [_probe_number(p, i) for i, p in enumerate(probes, 1)]
    lo = [p["bracket"][0] for p in probes]
    hi = [p["bracket"][1] for p in probes]
    ends = ("before the knee", "past the knee") if knee else ("passing end", "failing end")
    a2.plot(n, [float("nan") if v is None else v for v in lo], "C2-o", label=ends[0])
    a2.plot(n, [float("nan") if v is None else v for v in hi], "C3-o", label=ends[1])
    a2.set(title="Bracket after each probe", xlabel="stage", ylabel=str(unit))
    a2.legend()
    a2.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def early_ends(summary: Mapping[str, Any]) -> list[str]:
    """'stage N (label) ended early: why' for each stage the saturation guard cut short."""
    out = []
    for e in summary.get("stages") or []:
        why = e.get("ended_by") or ""
        if why.startswith("over-saturated"):
            label = f"{e['users']} users" if e.get("rate") is None else f"{e['rate']:g} req/s"
            out.append(f"{stage_name(e['stage'])} ({label}) ended early: {why}")
    return out


def settling_note(summary: Mapping[str, Any]) -> str:
    """One line for a run whose stages settled before they were measured (a --sweep with
    --warmup; the search's table says it per probe): how long each stage needed, '' otherwise."""
    if summary.get("search"):
        return ""
    parts = []
    for e in summary.get("stages") or []:
        if e.get("settled") is None:
            continue
        label = f"{e['users']} users" if e.get("rate") is None else f"{e['rate']:g} req/s"
        took = f"{float(e.get('warmup_s') or 0.0):.0f} s"
        state = f"settled after {took}" if e["settled"] else f"unsettled when measured from {took}"
        parts.append(f"{stage_name(e['stage'])} ({label}) {state}")
    return "Stages measured once settled: " + "; ".join(parts) + "." if parts else ""
