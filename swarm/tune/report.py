"""`swarm tune`'s page: DIR/tune.html (self-contained, like report.html: inline CSS, the interactive
Pareto chart drawn by the inlined uPlot (swarm/analysis/interactive.py), the PNG embedded as a data
URI under it) and DIR/pareto.png.

The page: the tune's line (base command, search, SLO, GPUs, cost), the best configuration for the SLO
with the exact command that starts it, the configurations side by side (a failed one with its reason
and its server log's last lines), the guided journey step by step (--guided), and the Pareto chart:
every probed point of every configuration, output tokens/s per user (1 / mean TPOT, see
swarm/tune/results.py) against output tokens/s per GPU, the front marked.
"""

from __future__ import annotations

import base64
import html
import shlex
from pathlib import Path
from typing import Any

from swarm.analysis.interactive import LICENCE_NOTE, Chart, Series, charts_html
from swarm.analysis.plots import png
from swarm.analysis.report_cells import CSS, fmt, table_html
from swarm.core.runfiles import PARETO_PNG, TUNE_HTML
from swarm.tune.results import ConfigResult, TuneResult, answer_text, best_config, pareto_front


def write_tune_report(out_dir: Path, result: TuneResult) -> Path:
    """Write out_dir/tune.html (and out_dir/pareto.png when any configuration has a probed point);
    returns the HTML's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    chart = pareto_png(result)
    if chart is not None:
        (out_dir / PARETO_PNG).write_bytes(chart)
    path = out_dir / TUNE_HTML
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(result, chart), encoding="utf-8")
    tmp.replace(path)
    return path


def pareto_points(result: TuneResult) -> list[tuple[str, float, float]]:
    """(configuration, output tok/s per user, output tok/s per GPU) of every probed point."""
    gpus = max(result.gpus, 1)
    return [
        (c.name, p.output_tok_s_per_user, p.output_tok_s / gpus)
        for c in result.configs
        for p in c.points
        if p.output_tok_s > 0 and p.output_tok_s_per_user > 0
    ]


def pareto_png(result: TuneResult) -> bytes | None:
    """The Pareto chart as PNG bytes; None without any probed point."""
    points = pareto_points(result)
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = _pareto_figure(points, plt)
    try:
        return png(fig)
    finally:
        plt.close(fig)


def _pareto_figure(points: list[tuple[str, float, float]], plt: Any) -> Any:
    fig, ax = plt.subplots(figsize=(9, 5.5))
    names = list(dict.fromkeys(name for name, _, _ in points))
    for i, name in enumerate(names):
        xs = [x for n, x, _ in points if n == name]
        ys = [y for n, _, y in points if n == name]
        ax.scatter(xs, ys, color=f"C{i % 10}", label=name, zorder=3, s=28)
    front = sorted((points[i][1], points[i][2]) for i in pareto_front([(x, y) for _, x, y in points]))
    ax.plot(
        [x for x, _ in front],
        [y for _, y in front],
        "k--",
        marker="o",
        markerfacecolor="none",
        markersize=11,
        label="Pareto front",
        zorder=2,
    )
    ax.set(
        title="Every probed point: per-user speed against per-GPU throughput",
        xlabel="output tokens/s per user (1 / mean TPOT)",
        ylabel="output tokens/s per GPU",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def pareto_chart(result: TuneResult) -> Chart | None:
    """The Pareto chart, interactive: a series of points per configuration, the front as a dashed line
    (x: every probed point's tok/s per user, ascending; each series holds its own points' values)."""
    points = pareto_points(result)
    if not points:
        return None
    xs = sorted({x for _, x, _ in points})
    at = {x: i for i, x in enumerate(xs)}
    names = list(dict.fromkeys(name for name, _, _ in points))
    series = []
    for name in names:
        values: list[float | None] = [None] * len(xs)
        for n, x, y in points:
            if n == name:
                values[at[x]] = max(y, values[at[x]] or 0.0)
        series.append(Series(name, values, points=True))
    front: list[float | None] = [None] * len(xs)
    for i in pareto_front([(x, y) for _, x, y in points]):
        front[at[points[i][1]]] = points[i][2]
    series.append(Series("Pareto front", front, color="#000000", dash=True))
    return Chart(
        "chart-pareto",
        "Every probed point: per-user speed against per-GPU throughput.",
        xs,
        series,
        "output tokens/s per user (1 / mean TPOT)",
        "output tokens/s per GPU",
        caption="The dashed line joins the Pareto front (no other point is better on both).",
    )


def render_html(result: TuneResult, chart: bytes | None) -> str:
    """tune.html: the tune's line, the best configuration, the configurations, the journey, the chart
    (interactive, with the PNG folded under it)."""
    interactive = pareto_chart(result)
    figure = (
        f"<p class='meta'>{html.escape(LICENCE_NOTE)}</p>\n{charts_html([interactive])}"
        if interactive is not None
        else "<p class='note'>No probed point to draw.</p>"
    )
    if chart is not None:
        figure += (
            f"<details><summary>Static figure (PNG, also written beside this file: {PARETO_PNG})</summary>"
            f'<figure><img alt="Pareto chart" src="data:image/png;base64,{base64.b64encode(chart).decode()}">'
            "<figcaption>Every probed point of every configuration: output tokens/s one user sees (1 / mean "
            "TPOT) against output tokens/s per GPU; the dashed line joins the Pareto front (no other point "
            "is better on both).</figcaption></figure></details>"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm tune</title>
<style>{CSS} pre{{font-size:12px;background:#f7f7f7;padding:6px;overflow-x:auto}}</style></head><body>
<h1>Tune report</h1>
<p class="meta">{" &middot; ".join(_meta(result))}</p>
<h2>Best configuration</h2>
{_best_html(result)}
<h2>Configurations</h2>
{_configs_html(result)}
{_journey_html(result)}<h2>Pareto chart</h2>
{figure}
</body></html>
"""


def _meta(result: TuneResult) -> list[str]:
    parts = [f"base command <code>{html.escape(shlex.join(result.serve_cmd))}</code>"]
    parts.append(f"search {html.escape(result.search)}" if result.search else "a given sweep")
    if result.slo:
        parts.append(f"SLO {html.escape(result.slo)}")
    parts.append(f"{result.gpus} GPU{'s' if result.gpus != 1 else ''}")
    if result.gpu_hourly_cost is not None:
        parts.append(f"${result.gpu_hourly_cost:g} per GPU-hour")
    ok = sum(c.status == "ok" for c in result.configs)
    parts.append(f"{len(result.configs)} configurations ({ok} measured)")
    return parts


def _best(result: TuneResult) -> ConfigResult | None:
    if result.best is not None:
        return next((c for c in result.configs if c.name == result.best), None)
    return best_config(result.configs, need_answer=result.slo is not None)


def _best_html(result: TuneResult) -> str:
    best = _best(result)
    if best is None:
        if any(c.status == "ok" for c in result.configs):
            return "<p>No configuration met the SLO at any load.</p>"
        return "<p>No configuration was measured.</p>"
    unit = "" if best.answer is None else f" &mdash; answer {html.escape(answer_text(best))}"
    cost = (
        ""
        if best.cost_per_m_output_tokens is None
        else f"; ${best.cost_per_m_output_tokens:.2f} per million output tokens"
        + (
            ""
            if best.cost_per_k_requests is None
            else f", ${best.cost_per_k_requests:.3f} per thousand requests"
        )
    )
    why = f"<p>What holds it: {html.escape(best.why)}</p>" if best.why else ""
    return (
        f"<p><b>{html.escape(best.name)}</b>{unit} ({fmt(best.qps)} QPS, {fmt(best.output_tok_s)} output "
        f"tok/s{cost}).</p>{why}<p>Start it with:</p><pre>{html.escape(shlex.join(best.command))}</pre>"
    )


def _configs_html(result: TuneResult) -> str:
    priced = result.gpu_hourly_cost is not None
    head = ["config", "status", "answer (bracket)", "QPS", "output tok/s", "TTFT p99 (ms)", "TPOT p99 (ms)"]
    head += ["bottleneck", "why"] + (["$/M tok", "$/k req"] if priced else [])
    rows, classes = [], []
    for c in result.configs:
        classes.append("" if c.status == "ok" else "untrusted")
        if c.status != "ok":
            reason = html.escape(c.reason or "-")
            tail = f"<pre>{html.escape(c.log_tail)}</pre>" if c.log_tail else ""
            rows.append([html.escape(c.name), html.escape(c.status), reason + tail] + [""] * (len(head) - 3))
            continue
        cells = [
            html.escape(c.name) + (" &#9733;" if c is _best(result) else ""),
            "ok",
            html.escape(answer_text(c)),
            fmt(c.qps),
            fmt(c.output_tok_s),
            fmt(c.ttft_p99_s, "ms"),
            fmt(c.tpot_p99_s, "ms"),
            fmt(c.bottleneck),
            f'<div style="text-align:left">{fmt(c.why)}</div>',  # prose, not a figure
        ]
        if priced:
            cells.append("-" if c.cost_per_m_output_tokens is None else f"{c.cost_per_m_output_tokens:.2f}")
            cells.append("-" if c.cost_per_k_requests is None else f"{c.cost_per_k_requests:.3f}")
        rows.append(cells)
    return table_html(head, rows, classes)


def _journey_html(result: TuneResult) -> str:
    """The guided journey: each step's configuration, the flag changed, why, the answer before and after."""
    if not result.steps:
        return ""
    items = []
    for i, s in enumerate(result.steps, 1):
        change = "start" if s.changed is None else html.escape(s.changed)
        answers = f"answer {_answer(s.answer_before)} &rarr; {_answer(s.answer_after)}"
        items.append(
            f"<li><b>step {i}: {change}</b> ({html.escape(s.config)}): {html.escape(s.why)}; {answers}</li>"
        )
    return f"<h2>Guided journey</h2>\n<ol class='findings'>{''.join(items)}</ol>\n"


def _answer(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{int(v)}" if v == int(v) else f"{v:g}"
