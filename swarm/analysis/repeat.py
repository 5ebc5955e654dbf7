"""`swarm run --repeat N`: the whole plan run N times; per stage, the mean of each run's value and
its 95% Student t interval across the runs (as AIPerf's repeated runs report), written to
DIR/repeat.json and printed as a table.

Pure (summaries in, a dict or text out). The runs are treated as independent samples of the same
experiment: each run's stage value is one observation, so the interval says how far the mean of N
runs may be from the long-run value, including run-to-run effects a single run's own interval
(summary.json `ci`) cannot see (start-up, the server's state, the machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swarm.analysis.table import LATENCY_COLUMNS, align
from swarm.core.units import seconds_text, stage_name
from swarm.stats.confidence import LEVEL, mean_interval

# (key, title, how to read it from a block)
METRICS: tuple[tuple[str, str], ...] = (
    ("qps", "QPS"),
    ("output_tok_s", "out tok/s"),
    *LATENCY_COLUMNS,
    ("goodput", "good/s"),
)


def value(block: Mapping[str, Any], key: str) -> float | None:
    """One metric of a summary block: a rate, a latency percentile (`ttft_p50`) or the goodput rate."""
    if key in ("qps", "output_tok_s"):
        return block.get(key)
    if key == "goodput":
        return (block.get("goodput") or {}).get("rate")
    metric, stat = key.split("_")
    return (block.get(f"{metric}_s") or {}).get(stat)


def _entries(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """stage index (as text, repeat.json's key) -> its total block, and "run" -> the run's total."""
    out = {str(st["stage"]): st.get("total") or {} for st in summary.get("stages") or []}
    out["run"] = summary.get("total") or {}
    return out


def across_runs(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{runs, level, stages: {stage: {metric: {mean, ci: [low, high] | None, values}}}} over the
    runs that have the stage and the metric."""
    per_run = [_entries(s) for s in summaries]
    names = list(dict.fromkeys(name for entries in per_run for name in entries))
    stages: dict[str, dict[str, Any]] = {}
    for name in names:
        out: dict[str, Any] = {}
        for key, _ in METRICS:
            values = [v for entries in per_run if (v := value(entries.get(name) or {}, key)) is not None]
            if not values:
                continue
            mean, ci = mean_interval(values)
            out[key] = {"mean": mean, "ci": list(ci) if ci else None, "values": values}
        stages[name] = out
    return {"runs": len(summaries), "level": LEVEL, "stages": stages}


def _label(key: str) -> str:
    """A repeat.json stage key as the table shows it: "0" -> "stage 1" (swarm/core/units.py), "run"."""
    return stage_name(int(key)) if key.isdigit() else key


def _text(key: str, v: float) -> str:
    return f"{v:.2f}" if key in ("qps", "output_tok_s", "goodput") else seconds_text(v, ms_digits=1)


def render(result: Mapping[str, Any]) -> str:
    """Per stage (and the run): mean ± the 95% half-width across runs, for each metric present."""
    stages = result["stages"]
    keys = [k for k, _ in METRICS if any(k in m for m in stages.values())]
    head = ["stage", *(title for k, title in METRICS if k in keys)]
    rows = []
    for name, metrics in stages.items():
        row = [_label(name)]
        for k in keys:
            m = metrics.get(k)
            if m is None:
                row.append("-")
            elif m["ci"] is None:
                row.append(_text(k, m["mean"]))
            else:
                row.append(f"{_text(k, m['mean'])} ± {_text(k, (m['ci'][1] - m['ci'][0]) / 2)}")
        rows.append(row)
    title = f"across {result['runs']} runs: mean ± 95% interval half-width (Student t)"
    return "\n".join([title, *align(head, rows)])


def compare_text(results: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str:
    """`swarm compare` of --repeat directories (their repeat.json), the first the baseline: per stage
    and metric, each one's mean, and each change from the first with its 95% interval from the two
    across-run intervals (MOVER, swarm/stats/difference.py), `*` when significant."""
    from swarm.analysis.change_text import change_text, letter, note
    from swarm.stats.difference import Estimate, change

    base = results[0]["stages"]
    stages = [name for name in base if all(name in r["stages"] for r in results[1:])]
    head = ["stage", "metric", *(letter(i) for i in range(len(results)))]
    head += [f"{letter(i)} vs A" for i in range(1, len(results))]
    rows, changes = [], []
    for name in stages:
        for k, title in METRICS:
            ms = [r["stages"][name].get(k) for r in results]
            if ms[0] is None:
                continue
            es = [None if m is None else Estimate(m["mean"], *(m["ci"] or (None, None))) for m in ms]
            cs = [None if e is None or es[0] is None else change(es[0], e) for e in es[1:]]
            changes += cs
            means = ["-" if e is None else _text(k, e.value) for e in es]
            rows.append([_label(name), title, *means, *(change_text(c) for c in cs)])
    runs = ", ".join(
        f"{letter(i)} = {n} ({r['runs']} runs)" for i, (n, r) in enumerate(zip(names, results, strict=True))
    )
    return "\n".join([f"{runs}: means across runs", *align(head, rows), note(changes)])
