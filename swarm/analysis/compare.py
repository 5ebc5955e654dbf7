"""`swarm compare DIR_A DIR_B`: stage-by-stage deltas of two runs (e.g. before/after raising
--max-num-seqs), printed as a table and written as a self-contained HTML page with overlay plots.

Stages are matched by concurrency (users) when both runs know it, else by stage index. Each
metric shows A, B and the change B vs A; the HTML colours a change green when it is better
(more QPS / tok/s, less latency, fewer failures) and red when worse.

Noise: where both runs' summary.json carry 95% intervals for a stage (`ci`: QPS, TTFT p50/p99,
TPOT p50, E2E p99; swarm/stats/confidence.py), a change no larger than the two intervals'
combined half-width (sqrt(h_a^2 + h_b^2)) is marked "(noise)" in the text and left uncoloured in
the HTML: the runs do not tell such values apart. Column `<metric>_noise` of the table: True
(within the noise), False (beyond it), None (no intervals). Two `swarm run --repeat N`
directories (each with repeat.json) are compared by their across-run means and intervals
instead (text only: swarm/analysis/repeat.py `compare_text`).

Provenance: both runs' summary.json `provenance` side by side, every differing field highlighted,
a different server version or launch flag first (swarm/analysis/provenance.py).
"""

from __future__ import annotations

import argparse
import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swarm.analysis import provenance
from swarm.analysis.compare_charts import compare_charts
from swarm.analysis.finding import Finding
from swarm.analysis.interactive import LICENCE_NOTE, charts_html
from swarm.analysis.plots import png
from swarm.analysis.report_cells import CSS
from swarm.analysis.rundir import RunData, findings, load_run
from swarm.core.runfiles import RECORDS_DIR, REQUESTS, SUMMARY
from swarm.core.units import ms_number, percent_text, stage_number
from swarm.stats.confidence import beyond_noise
from swarm.stats.quantiles import error_rate

# (column, title, unit, higher is better)
METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("qps", "QPS", "", True),
    ("output_tok_s", "out tok/s", "", True),
    ("ttft_p50", "TTFT p50", "ms", False),
    ("ttft_p99", "TTFT p99", "ms", False),
    ("e2e_p99", "E2E p99", "s", False),
    ("tpot_p50", "TPOT p50", "ms", False),
    ("error_rate", "errors", "%", False),
    ("srv_running_mean", "running", "", True),
    ("srv_waiting_mean", "waiting", "", False),
    ("srv_kv_max", "KV max", "%", False),
    ("srv_preemptions", "preempt", "", False),
    ("goodput", "good/s", "", True),  # --goodput: good requests per second (absent without)
)


CI_METRICS = ("qps", "ttft_p50", "ttft_p99", "e2e_p99", "tpot_p50")  # those summary.json `ci` has


def _intervals(data: RunData, stage: int) -> dict[str, Any]:
    """The stage's 95% intervals from summary.json (`<metric>_ci` -> [low, high] or None) and its
    goodput rate (`goodput`, None without --goodput)."""
    for st in data.summary.get("stages") or []:
        if st.get("stage") == stage:
            total = st.get("total") or {}
            ci = total.get("ci") or {}
            return {
                "goodput": (total.get("goodput") or {}).get("rate"),
                **{f"{m}_ci": ci.get(m) for m in CI_METRICS},
            }
    return {"goodput": None}


def _values(data: RunData) -> dict[Any, dict[str, Any]]:
    """key (users, or ("stage", i)) -> metric values (and `<metric>_ci` where summary.json has one)."""
    by_users = all(r.users is not None for r in data.rows) and len({r.users for r in data.rows}) == len(
        data.rows
    )
    out = {}
    for r in data.rows:
        s = data.server.get(r.stage)
        out[r.users if by_users else ("stage", r.stage)] = {
            "stage": r.stage,
            "qps": r.qps,
            "output_tok_s": r.output_tok_s,
            "ttft_p50": r.ttft_p50,
            "ttft_p99": r.ttft_p99,
            "e2e_p99": r.e2e_p99,
            "tpot_p50": r.tpot_p50,
            "error_rate": error_rate(r.requests, r.failures, r.cancelled),
            "srv_running_mean": s.running_mean if s else None,
            "srv_waiting_mean": s.waiting_mean if s else None,
            "srv_kv_max": s.kv_max if s else None,
            "srv_preemptions": s.preemptions if s else None,
            **_intervals(data, r.stage),
        }
    return out


def compare_table(a: RunData, b: RunData) -> Any:
    """One row per matched stage: <metric>_a, <metric>_b, <metric>_delta (relative change B vs A)."""
    import pandas as pd

    va, vb = _values(a), _values(b)
    keys_users = not any(isinstance(k, tuple) for k in (*va, *vb))
    if keys_users:
        keys = sorted(set(va) | set(vb))
    else:  # match by stage index
        va = {v["stage"]: v for v in va.values()}
        vb = {v["stage"]: v for v in vb.values()}
        keys = sorted(set(va) | set(vb))
    rows = []
    for k in keys:
        ra, rb = va.get(k, {}), vb.get(k, {})
        # matched by index, shown by number (from 1, as every label numbers stages)
        row: dict[str, Any] = {"users": k} if keys_users else {"stage": stage_number(k)}
        for col, *_ in METRICS:
            x, y = ra.get(col), rb.get(col)
            row[f"{col}_a"], row[f"{col}_b"] = x, y
            row[f"{col}_delta"] = (y / x - 1.0) if x not in (None, 0) and y is not None else None
            beyond = None
            if col in CI_METRICS and x is not None and y is not None:
                beyond = beyond_noise(x, ra.get(f"{col}_ci"), y, rb.get(f"{col}_ci"))
            row[f"{col}_noise"] = None if beyond is None else not beyond
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(v: Any, unit: str) -> str:
    if v is None or v != v:  # None or NaN
        return "-"
    if unit == "ms":
        return ms_number(v, thousands=False)
    if unit == "s":
        return f"{v:.2f}"
    if unit == "%":
        return percent_text(v)
    return f"{v:,.1f}"


def _delta(v: Any) -> str:
    return "" if v is None or v != v else f"{v * 100:+.0f}%"


def render_text(table: Any, a: RunData, b: RunData) -> str:
    key = table.columns[0]
    cols = [m for m in METRICS if table[f"{m[0]}_a"].notna().any() or table[f"{m[0]}_b"].notna().any()]
    header = [key] + [
        f"{title}{' ' + unit if unit and unit != '%' else ''} A -> B" for _, title, unit, _ in cols
    ]
    rows = []
    for i, r in table.iterrows():
        cells = [str(table[key].tolist()[i])]
        for col, _, unit, _ in cols:
            noise = " (noise)" if r[f"{col}_noise"] is True else ""
            cells.append(
                f"{_cell(r[f'{col}_a'], unit)} -> {_cell(r[f'{col}_b'], unit)} {_delta(r[f'{col}_delta'])}{noise}".strip()
            )
        rows.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [
        f"A = {a.name} ({a.directory}), B = {b.name} ({b.directory})",
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    if any(table[f"{m}_noise"].eq(True).any() for m in CI_METRICS if f"{m}_noise" in table):
        lines.append("(noise): the change is within the two runs' 95% intervals combined")
    return "\n".join(lines)


def headline(fa: Sequence[Finding], fb: Sequence[Finding]) -> list[str]:
    """The ceiling and bottleneck of each run, side by side."""
    kinds = (
        "saturation",
        "no_saturation",
        "max_num_seqs_cap",
        "kv_bound",
        "compute_bound",
        "client_bound",
        "slo_max_concurrency",
    )
    out = []
    for label, fs in (("A", fa), ("B", fb)):
        for f in fs:
            if f.kind in kinds:
                out.append(f"{label}: {f.text}")
    return out


def _plots(table: Any, a: RunData, b: RunData) -> dict[str, bytes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = table.columns[0]
    x = [float(v) for v in table[key]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (col, title, unit, _) in zip(axes, (METRICS[0], METRICS[3], METRICS[1]), strict=True):
        scale = 1000 if unit == "ms" else 1
        for side, name, style in (("a", f"A {a.name}", "C0-o"), ("b", f"B {b.name}", "C1-o")):
            ys = [float("nan") if v is None or v != v else v * scale for v in table[f"{col}_{side}"]]
            ax.plot(x, ys, style, label=name)
        ax.set(title=f"{title} vs {key}", xlabel=key, ylabel=unit or title)
        ax.set_xticks(x, [str(v) for v in table[key]])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    image = png(fig)
    plt.close(fig)
    return {"compare.png": image}


def _charts(table: Any, a: RunData, b: RunData) -> str:
    charts = compare_charts(table, a.name, b.name, METRICS)
    return f"<p class='meta'>{html.escape(LICENCE_NOTE)}</p>{charts_html(charts)}" if charts else ""


def render_html(table: Any, a: RunData, b: RunData, lines: Sequence[str], pngs: dict[str, bytes]) -> str:
    key = table.columns[0]
    cols = [m for m in METRICS if table[f"{m[0]}_a"].notna().any() or table[f"{m[0]}_b"].notna().any()]
    head = (
        f"<tr><th rowspan=2>{key}</th>"
        + "".join(f"<th colspan=3>{html.escape(t)}{' (' + u + ')' if u else ''}</th>" for _, t, u, _ in cols)
        + "</tr><tr>"
        + "".join("<th>A</th><th>B</th><th>&Delta;</th>" for _ in cols)
        + "</tr>"
    )
    body = []
    for i, r in table.iterrows():
        cells = [f"<td>{html.escape(str(table[key].tolist()[i]))}</td>"]
        for col, _, unit, higher in cols:
            d = r[f"{col}_delta"]
            color = ""
            if d is not None and d == d and abs(d) >= 0.02 and r[f"{col}_noise"] is not True:
                color = "#dff5df" if (d > 0) == higher else "#fbe0e0"
            style = f" style='background:{color}'" if color else ""
            cells.append(
                f"<td>{_cell(r[f'{col}_a'], unit)}</td><td>{_cell(r[f'{col}_b'], unit)}</td>"
                f"<td{style}>{_delta(d)}{' (noise)' if r[f'{col}_noise'] is True else ''}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    imgs = "".join(
        f"<figure><img alt='{n}' src='data:image/png;base64,{base64.b64encode(p).decode()}'></figure>"
        for n, p in pngs.items()
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm compare: {html.escape(a.name)} vs {html.escape(b.name)}</title>
<style>{CSS}</style></head><body>
<h1>Run comparison</h1>
<p class="meta">A = <b>{html.escape(a.name)}</b> ({html.escape(str(a.directory))}) &middot;
B = <b>{html.escape(b.name)}</b> ({html.escape(str(b.directory))}) &middot; &Delta; = B vs A; green better, red worse</p>
<h2>Provenance</h2>{provenance.compare_html(a.summary, b.summary)}
<h2>Ceilings and bottlenecks</h2><ul class="findings">{items or "<li>No findings.</li>"}</ul>
<h2>Stage by stage</h2>
<table>{head}{"".join(body)}</table>
<h2>Charts</h2>{_charts(table, a, b)}
<details><summary>Static figure (PNG, also written beside this file)</summary>{imgs}</details>
</body></html>
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="DIR_A", help="the baseline run's directory")
    p.add_argument("b", metavar="DIR_B", help="the run to compare with it")
    p.add_argument("--html", default=None, help="where to write the HTML (default: DIR_B/compare.html)")


def _read_repeat(path: Path) -> dict:
    """A `swarm run --repeat` directory's repeat.json; a cut or foreign one is bad input (one line)."""
    from swarm.core.errors import UsageError

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} is not a readable repeat.json ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"{path} is not a readable repeat.json (a JSON {type(data).__name__}, not an object)"
        )
    return data


def main(args: argparse.Namespace) -> int:
    from swarm.analysis.repeat import compare_text
    from swarm.core.errors import UsageError
    from swarm.core.runfiles import REPEAT_JSON

    if args.html and (Path(args.html).is_dir() or not Path(args.html).parent.is_dir()):  # before any work
        where = "is a directory" if Path(args.html).is_dir() else "is in no existing folder"
        raise UsageError(f"--html {args.html} {where}: give a file path, e.g. DIR_B/compare.html")
    if all((Path(d) / REPEAT_JSON).exists() for d in (args.a, args.b)):  # two `swarm run --repeat N` dirs
        a_rep, b_rep = (_read_repeat(Path(d) / REPEAT_JSON) for d in (args.a, args.b))
        print(compare_text(a_rep, b_rep, (str(args.a), str(args.b))))
        return 0
    runs = []
    for d in (Path(args.a), Path(args.b)):
        if not d.is_dir() or not any((d / n).exists() for n in (SUMMARY, REQUESTS, RECORDS_DIR)):
            raise UsageError(f"{d} is not a run directory (no summary.json, requests.parquet or records/)")
        runs.append(load_run(d))
    a, b = runs
    table = compare_table(a, b)
    lines = headline(findings(a), findings(b))
    print(render_text(table, a, b))
    for line in provenance.compare_lines(a.summary, b.summary):
        print(line)
    for line in lines:
        print(line)
    out = Path(args.html) if args.html else b.directory / "compare.html"
    html = render_html(table, a, b, lines, _plots(table, a, b))
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as e:  # a directory, a missing or read-only folder
        raise UsageError(f"--html {out} cannot be written: {e.strerror or e}") from None
    print(f"swarm compare: {out}")
    return 0
