"""`swarm compare A B [C ...]`: what changed between runs, stage by stage, against the first (the
baseline): e.g. before/after raising --max-num-seqs, two repeats, a tune's configurations. Printed
as a table and written as a self-contained HTML page with overlay plots (A and B).

Inputs (swarm/analysis/compare_inputs.py): run directories, `swarm run --repeat` directories,
a `swarm tune` directory (its configurations' runs) or `TUNEDIR:CONFIG`. Runs whose workloads
differ (options, workload files, stage plan) are refused in one line unless `--allow-different`.

Provenance first: each run's summary.json `provenance` against the baseline's, every differing
field marked (`!`, bold on a terminal; highlighted rows in the HTML), a different server version
or launch flag first (swarm/analysis/provenance.py).

Stages are matched by concurrency (users) when every run knows it, else by stage index. Each stage
and metric shows every run's value and each run's change from A with its 95% interval (MOVER over
both runs' intervals, swarm/stats/difference.py), marked `*` when the interval excludes 0: the
change is significant. The intervals are the stage's from its records where the run has them
(swarm/analysis/record_intervals.py: batch means, neighbouring requests are correlated), else
summary.json's `ci`; QPS, TTFT p50/p99, TPOT p50 and E2E p99 have them, the rest show the change
alone. A note says how many marks chance alone would give over the judged changes. The HTML
colours a significant change green when better (more QPS / tok/s, less latency, fewer failures)
and red when worse.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm.analysis import compare_inputs, provenance
from swarm.analysis.change_text import change_text, letter, note
from swarm.analysis.compare_charts import compare_charts
from swarm.analysis.finding import Finding
from swarm.analysis.interactive import LICENCE_NOTE, charts_html
from swarm.analysis.plots import png
from swarm.analysis.record_intervals import stage_intervals
from swarm.analysis.report_cells import CSS
from swarm.analysis.rundir import RunData, StageRow, findings, load_run
from swarm.analysis.table import align
from swarm.core.units import ms_number, percent_text, stage_number
from swarm.stats.difference import Change, Estimate, change
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


def _intervals(data: RunData, row: StageRow) -> dict[str, Any]:
    """The stage's 95% intervals (`<metric>_ci` -> [low, high] or None) and its goodput rate
    (`goodput`, None without --goodput): from its records where the run has them (correlation between
    neighbouring requests counted, swarm/analysis/record_intervals.py), else summary.json's `ci`."""
    total: dict[str, Any] = {}
    for st in data.summary.get("stages") or []:
        if st.get("stage") == row.stage:
            total = dict(st.get("total") or {})
    ci = total.get("ci") or {}
    records = data.records
    if records is not None and len(records) and row.qps:
        ci = stage_intervals(
            records[records["stage"] == row.stage], row.start_s, row.end_s, row.warmup_s, row.qps
        )
    return {
        "goodput": (total.get("goodput") or {}).get("rate"),
        **{f"{m}_ci": ci.get(m) for m in CI_METRICS},
    }


def _values(data: RunData) -> dict[Any, dict[str, Any]]:
    """key (users, or ("stage", i)) -> metric values (and `<metric>_ci` where there is one)."""
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
            **_intervals(data, r),
        }
    return out


@dataclass(frozen=True)
class MetricRow:
    """One stage's metric across the runs: each run's value and each run's change from the first
    (None for the first, and where a run lacks the stage or the metric)."""

    key: Any  # the stage's users, or its number when the runs are matched by index
    metric: str
    title: str
    unit: str
    higher_better: bool
    values: list[float | None]
    changes: list[Change | None]


def _estimate(v: Mapping[str, Any], col: str) -> Estimate | None:
    x = v.get(col)
    if x is None or x != x:
        return None
    ci = v.get(f"{col}_ci")
    return Estimate(float(x), *(ci if ci else (None, None)))


def compare_rows(runs: Sequence[RunData]) -> tuple[str, list[MetricRow]]:
    """(the key's name, "users" or "stage"; one row per matched stage and metric any run has)."""
    values = [_values(r) for r in runs]
    by_users = not any(isinstance(k, tuple) for v in values for k in v)
    if not by_users:  # match by stage index
        values = [{v["stage"]: v for v in vs.values()} for vs in values]
    keys = sorted({k for vs in values for k in vs})
    rows = []
    for k in keys:
        per_run = [vs.get(k, {}) for vs in values]
        for col, title, unit, higher in METRICS:
            estimates = [_estimate(v, col) for v in per_run]
            if all(e is None for e in estimates):
                continue
            base = estimates[0]
            changes = [None] + [
                change(base, e) if base is not None and e is not None else None for e in estimates[1:]
            ]
            shown_key = k if by_users else stage_number(k)
            vals = [None if e is None else e.value for e in estimates]
            rows.append(MetricRow(shown_key, col, title, unit, higher, vals, changes))
    return ("users" if by_users else "stage"), rows


def compare_table(a: RunData, b: RunData) -> Any:
    """Two runs, one row per matched stage: <metric>_a, <metric>_b, <metric>_delta (relative change
    B vs A), <metric>_low/_high (its 95% interval) and <metric>_sig (True: significant, False: not,
    None: not judged)."""
    import pandas as pd

    key, rows = compare_rows([a, b])
    table: dict[Any, dict[str, Any]] = {}
    for r in rows:
        row = table.setdefault(r.key, {key: r.key})
        c = r.changes[1]
        row[f"{r.metric}_a"], row[f"{r.metric}_b"] = r.values
        row[f"{r.metric}_delta"] = None if c is None else c.relative
        row[f"{r.metric}_low"] = None if c is None else c.rel_low
        row[f"{r.metric}_high"] = None if c is None else c.rel_high
        row[f"{r.metric}_sig"] = None if c is None else c.significant
    frame = pd.DataFrame(list(table.values()))
    for col, *_ in METRICS:  # every metric's columns, empty where no run has it
        for suffix in ("a", "b", "delta", "low", "high", "sig"):
            if f"{col}_{suffix}" not in frame:
                frame[f"{col}_{suffix}"] = None
    return frame


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


def render_text(key: str, rows: Sequence[MetricRow], runs: Sequence[RunData]) -> str:
    others = range(1, len(runs))
    header = [key, "metric", *(letter(i) for i in range(len(runs))), *(f"{letter(i)} vs A" for i in others)]
    body = [
        [
            str(r.key),
            f"{r.title}{' ' + r.unit if r.unit and r.unit != '%' else ''}",
            *(_cell(v, r.unit) for v in r.values),
            *(change_text(r.changes[i]) for i in others),
        ]
        for r in rows
    ]
    names = ", ".join(
        f"{letter(i)} = {run.name} ({run.directory}){' [baseline]' if i == 0 else ''}"
        for i, run in enumerate(runs)
    )
    return "\n".join([names, *align(header, body), note(c for r in rows for c in r.changes)])


def headline(fa: Sequence[Finding], fb: Sequence[Finding]) -> list[str]:
    """The ceiling and bottleneck of each run, side by side."""
    kinds = (
        "saturation",
        "no_saturation",
        "max_num_seqs_cap",
        "kv_bound",
        "compute_bound",
        "client_bound",
        "late_sends",
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


def _colour(c: Change | None, higher: bool) -> str:
    """Green (better) or red (worse) for a significant change, or for an unjudged one of 2% or more."""
    if c is None or c.relative is None or c.significant is False:
        return ""
    if c.significant is None and abs(c.relative) < 0.02:
        return ""
    return "#dff5df" if (c.relative > 0) == higher else "#fbe0e0"


def render_html(
    key: str,
    rows: Sequence[MetricRow],
    runs: Sequence[RunData],
    lines: Sequence[str],
    pngs: dict[str, bytes],
    charts: str = "",
) -> str:
    others = range(1, len(runs))
    head = (
        f"<tr><th>{html.escape(key)}</th><th>metric</th>"
        + "".join(f"<th>{letter(i)}</th>" for i in range(len(runs)))
        + "".join(f"<th>{letter(i)} vs A (95% interval)</th>" for i in others)
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = [
            f"<td>{html.escape(str(r.key))}</td><td>{html.escape(r.title)}{' (' + r.unit + ')' if r.unit else ''}</td>"
        ]
        cells += [f"<td>{_cell(v, r.unit)}</td>" for v in r.values]
        for i in others:
            colour = _colour(r.changes[i], r.higher_better)
            style = f" style='background:{colour}'" if colour else ""
            cells.append(f"<td{style}>{html.escape(change_text(r.changes[i]))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    imgs = "".join(
        f"<figure><img alt='{n}' src='data:image/png;base64,{base64.b64encode(p).decode()}'></figure>"
        for n, p in pngs.items()
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    names = " &middot; ".join(
        f"{letter(i)} = <b>{html.escape(run.name)}</b> ({html.escape(str(run.directory))})"
        for i, run in enumerate(runs)
    )
    provenance_html = "".join(
        f"<h3>{letter(i)} vs A</h3>{provenance.compare_html(runs[0].summary, runs[i].summary)}"
        for i in others
    )
    title = " vs ".join(html.escape(r.name) for r in runs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm compare: {title}</title>
<style>{CSS}</style></head><body>
<h1>Run comparison</h1>
<p class="meta">{names} &middot; A is the baseline; green better, red worse (significant changes, or
unjudged ones of 2% or more)</p>
<h2>Provenance</h2>{provenance_html}
<h2>Ceilings and bottlenecks</h2><ul class="findings">{items or "<li>No findings.</li>"}</ul>
<h2>Stage by stage</h2>
<table>{head}{"".join(body)}</table>
<p class="note">{html.escape(note(c for r in rows for c in r.changes))}</p>
<h2>Charts</h2>{charts}
<details><summary>Static figure (PNG, also written beside this file)</summary>{imgs}</details>
</body></html>
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        metavar="RUN",
        nargs="+",
        help="two or more run directories, the first the baseline; a swarm run --repeat directory; a "
        "swarm tune directory (all its configurations) or TUNEDIR:CONFIG (one configuration's run)",
    )
    p.add_argument(
        "--html", default=None, help="where to write the HTML (default: the last run's compare.html)"
    )
    p.add_argument(
        "--allow-different",
        action="store_true",
        help="compare runs whose workloads differ (options, workload files, stage plan); refused otherwise",
    )


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


def _highlight(line: str) -> str:
    """A provenance difference as the terminal shows it: marked `!`, and bold on a terminal."""
    text = f"! {line.strip()}"
    return f"\033[1m{text}\033[0m" if sys.stdout.isatty() else text


def provenance_text(runs: Sequence[RunData]) -> list[str]:
    """Each run's provenance against the baseline's, every difference marked: shown first."""
    out = []
    for i in range(1, len(runs)):
        lines = provenance.compare_lines(runs[0].summary, runs[i].summary)
        out.append(f"{letter(i)} vs A {lines[0]}")
        out += [_highlight(line) for line in lines[1:]]
    return out


def main(args: argparse.Namespace) -> int:
    from swarm.analysis.repeat import compare_text
    from swarm.core.errors import UsageError
    from swarm.core.runfiles import REPEAT_JSON

    if args.html and (Path(args.html).is_dir() or not Path(args.html).parent.is_dir()):  # before any work
        where = "is a directory" if Path(args.html).is_dir() else "is in no existing folder"
        raise UsageError(f"--html {args.html} {where}: give a file path, e.g. DIR_B/compare.html")
    paths = compare_inputs.resolve(args.runs)
    repeats = [(p / REPEAT_JSON).exists() and not compare_inputs.is_run(p) for p in paths]
    if all(repeats):  # `swarm run --repeat N` directories
        results = [_read_repeat(p / REPEAT_JSON) for p in paths]
        print(compare_text(results, [str(p) for p in paths]))
        return 0
    if any(repeats):
        raise UsageError("swarm compare: give only --repeat directories or only run directories, not both")
    runs = [load_run(p) for p in paths]
    for i in range(1, len(runs)):
        diffs = compare_inputs.workload_differences(runs[0], runs[i])
        if diffs and not args.allow_different:
            raise UsageError(
                f"swarm compare: {runs[i].directory} ran another workload than {runs[0].directory} "
                f"({'; '.join(diffs)}); give --allow-different to compare them anyway"
            )
    key, rows = compare_rows(runs)
    lines = headline(findings(runs[0]), findings(runs[1]))
    for line in provenance_text(runs):
        print(line)
    print(render_text(key, rows, runs))
    for line in lines:
        print(line)
    out = Path(args.html) if args.html else runs[-1].directory / "compare.html"
    table = compare_table(runs[0], runs[1])  # the charts and the PNG draw A against B
    page = render_html(
        key, rows, runs, lines, _plots(table, runs[0], runs[1]), _charts(table, runs[0], runs[1])
    )
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as e:  # a directory, a missing or read-only folder
        raise UsageError(f"--html {out} cannot be written: {e.strerror or e}") from None
    print(f"swarm compare: {out}")
    return 0
