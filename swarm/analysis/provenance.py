"""The run's provenance as the report and `swarm compare` show it (summary.json's `provenance`,
swarm/stats/provenance.py): the report's header lines and its full table, and two runs side by
side with every difference highlighted, a different server version or launch flag first.
A run written before provenance existed shows "not recorded".
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from swarm.stats.provenance import UNKNOWN, differences, flatten

NOT_RECORDED = "not recorded (a run from before provenance was kept)"
DIFFER = "background:#fff2cc"  # a differing row in compare's table


def block_of(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    p = summary.get("provenance")
    return dict(p) if isinstance(p, Mapping) else None


def header_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's header, in words: the swarm, each target as it said, its command, the load
    machine, the workers, the GPUs, the workload files and the seed."""
    p = block_of(summary)
    if p is None:
        return [f"provenance: {NOT_RECORDED}"]
    sw = p.get("swarm") or {}
    commit = str(sw.get("commit", UNKNOWN))
    dirty = " (with local changes)" if sw.get("dirty") else ""
    lines = [f"swarm {sw.get('version', UNKNOWN)}, commit {commit[:12]}{dirty}"]
    for label, t in (p.get("targets") or {}).items():
        lines.append(
            f"target {label}: {t.get('family', UNKNOWN)} {t.get('version', UNKNOWN)}, "
            f"model {t.get('model', UNKNOWN)} (root {t.get('root', UNKNOWN)}), "
            f"max_model_len {t.get('max_model_len', UNKNOWN)}; launch flags "
            f"{_flags(t.get('launch_flags', UNKNOWN))}"
        )
    lines.append(f"target command: {p.get('target_command', UNKNOWN)}")
    m = p.get("machine") or {}
    mem = m.get("memory_bytes")
    mem_text = f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) else UNKNOWN
    lines.append(
        f"load machine {m.get('hostname', UNKNOWN)}: {m.get('cpu_model', UNKNOWN)}, {m.get('cores', UNKNOWN)} "
        f"cores, {mem_text}, {m.get('os', UNKNOWN)}, {m.get('python', UNKNOWN)}"
    )
    lines.append(f"workers' hosts: {', '.join(p.get('workers') or []) or UNKNOWN}")
    gpus = p.get("gpus")
    lines.append(
        "GPUs: "
        + (
            ", ".join(f"{g.get('host')} gpu {g.get('gpu')} {g.get('model') or ''}".strip() for g in gpus)
            if isinstance(gpus, list) and gpus
            else UNKNOWN
        )
    )
    files = p.get("files") or {}
    lines.append(
        "workload files: "
        + (
            "; ".join(f"{k} {f.get('path')} sha256 {str(f.get('sha256'))[:16]}" for k, f in files.items())
            or "none"
        )
        + f"; seed {p.get('seed', UNKNOWN)}"
    )
    return lines


def _flags(flags: Any) -> str:
    if isinstance(flags, Mapping):
        return " ".join(f"{k}={v}" for k, v in flags.items()) or UNKNOWN
    return str(flags)


def report_html(summary: Mapping[str, Any]) -> str:
    """The report's provenance: the header lines, and every field in a folded table."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in header_lines(summary))
    p = block_of(summary)
    if p is None:
        return f"<ul class='meta'>{items}</ul>\n"
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in flatten(p).items()
    )
    return (
        f"<ul class='meta'>{items}</ul>\n<details><summary>Provenance: every field</summary>"
        f"<table><tr><th>field</th><th>value</th></tr>{rows}</table></details>\n"
    )


def compare_lines(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Compare's text: each difference as `key: A -> B`, the server's version and flags first."""
    pa, pb = block_of(a), block_of(b)
    if pa is None or pb is None:
        return [f"provenance: {'A' if pa is None else 'B'} {NOT_RECORDED}"]
    diffs = differences(pa, pb)
    if not diffs:
        return ["provenance: the same swarm, options, target, machine and files"]
    return ["provenance differs:"] + [f"  {k}: {va} -> {vb}" for k, va, vb in diffs]


def compare_html(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """Both runs' provenance side by side: the differing fields first, highlighted, then the rest."""
    pa, pb = block_of(a), block_of(b)
    if pa is None or pb is None:
        return f"<p class='note'>Provenance: {'A' if pa is None else 'B'} {NOT_RECORDED}.</p>"
    fa, fb = flatten(pa), flatten(pb)
    diff = differences(pa, pb)
    differing = {k for k, _, _ in diff}
    same = [(k, fa[k], fb.get(k, "-")) for k in fa if k not in differing and fa[k] == fb.get(k, "-")]
    rows = [
        f"<tr style='{DIFFER}'><td><b>{html.escape(k)}</b></td><td>{html.escape(va)}</td>"
        f"<td>{html.escape(vb)}</td></tr>"
        for k, va, vb in diff
    ] + [
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(va)}</td><td>{html.escape(vb)}</td></tr>"
        for k, va, vb in same
    ]
    return (
        f"<p class='meta'>{len(diff)} field(s) differ (highlighted, the server's version and flags first)."
        f"</p><table><tr><th>field</th><th>A</th><th>B</th></tr>{''.join(rows)}</table>"
    )
