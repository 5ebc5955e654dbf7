"""The report's plots: matplotlib figures from a loaded run (`RunData`), and `png(fig)` -> bytes.

`render_plots` returns only the plots a run has data for (`PNGS` names them all): QPS, latency and
throughput vs concurrency (lines; for a single stage no QPS/latency "vs concurrency" plot, and
grouped bars for the rest), the server's timeline, client vs server TTFT, every request's TTFT
by send time, and for a `--search` run `search.png` (swarm/analysis/search.py). matplotlib is imported lazily
(Agg backend): loading a run never needs it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import Finding
from swarm.analysis.rundir import RunData
from swarm.core.runfiles import (
    LATENCY_PNG,
    QPS_PNG,
    REQUESTS_TIMELINE_PNG,
    SEARCH_PNG,
    SERVER_TIMELINE_PNG,
    THROUGHPUT_PNG,
    TTFT_PNG,
)
from swarm.core.units import stage_number

PNGS = (
    QPS_PNG,
    LATENCY_PNG,
    THROUGHPUT_PNG,
    SERVER_TIMELINE_PNG,
    TTFT_PNG,
    REQUESTS_TIMELINE_PNG,
)
CUT = ("cancelled", "cancelled_by_client")  # outcomes cut by the stop or by the client: neither ok nor failed


def png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (100 dpi)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def stage_axis(data: RunData) -> tuple[list[float], list[str], str]:
    users = [r.users for r in data.rows]
    if all(u is not None for u in users) and len(set(users)) == len(users):
        mark = "~" if data.users_estimated else ""
        return (
            [float(u) for u in users],
            [f"{mark}{u}" for u in users],
            "concurrent users" + (" (estimated)" if data.users_estimated else ""),
        )
    numbers = [stage_number(r.stage) for r in data.rows]
    return [float(n) for n in numbers], [str(n) for n in numbers], "stage"


def _series(
    ax: Any, x: list[float], labels: list[str], ys: list[tuple[str, list[float | None], str]], bars: bool
) -> None:
    """Lines with markers vs concurrency; grouped bars when there is one stage only."""
    import numpy as np

    if bars:
        pos = np.arange(len(x))
        width = 0.8 / max(len(ys), 1)
        for i, (label, y, style) in enumerate(ys):
            vals = [np.nan if v is None else v for v in y]
            ax.bar(
                pos + i * width - 0.4 + width / 2,
                vals,
                width,
                label=label,
                color=style[:2] if style else None,
            )
        ax.set_xticks(pos, labels)
    else:
        for label, y, style in ys:
            vals = [np.nan if v is None else v for v in y]
            ax.plot(x, vals, style, label=label, marker="o")
        ax.set_xticks(x, thinned_labels(x, labels))
    ax.grid(True, alpha=0.3)


TICK_GAP = 0.05  # of the x range: closer tick labels would print over each other (a search's 213, 218, 221)


def thinned_labels(x: Sequence[float], labels: Sequence[str], gap: float = TICK_GAP) -> list[str]:
    """The tick labels with those too close to the last one kept blanked (the tick stays)."""
    span = (max(x) - min(x)) if x else 0.0
    out, last = [], None
    for xi, label in zip(x, labels, strict=True):
        if last is None or abs(xi - last) >= gap * span:
            out.append(label)
            last = xi
        else:
            out.append("")
    return out


def _ms_list(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else v * 1000 for v in values]


def render_plots(data: RunData, found: Sequence[Finding]) -> dict[str, Any]:
    """name -> matplotlib Figure (only the plots that have data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, Any] = {}
    if not data.rows:
        return figs
    if data.summary.get("search"):  # probes come in search order: draw the lines by load
        data = dataclasses.replace(data, rows=sorted(data.rows, key=lambda r: (r.users or 0, r.stage)))
    axis = _Axis(*stage_axis(data), bars=len(data.rows) == 1)
    ceiling = next((f.stage for f in found if f.kind == "saturation"), None)
    figs[QPS_PNG] = _qps_figure(data, axis, ceiling, plt)
    figs[LATENCY_PNG] = _latency_figure(data, axis, plt)
    figs[THROUGHPUT_PNG] = _throughput_figure(data, axis, plt)
    if data.snapshots:
        figs[SERVER_TIMELINE_PNG] = _server_timeline(data, plt)
        pairs = [data.ttft_pairs.get(r.stage) for r in data.rows]
        if any(p is not None for p in pairs):
            figs[TTFT_PNG] = _ttft_figure(pairs, axis, plt)
    if data.records is not None and len(data.records):
        figs[REQUESTS_TIMELINE_PNG] = _requests_timeline(data, plt)
    if axis.bars:  # one stage: nothing varies "vs concurrency"
        for name in (QPS_PNG, LATENCY_PNG):
            plt.close(figs.pop(name))
    from swarm.analysis import search

    fig = search.plot(data, plt)
    if fig is not None:
        figs[SEARCH_PNG] = fig
    return figs


@dataclasses.dataclass(frozen=True)
class _Axis:
    """The x axis the "vs concurrency" plots share: positions, tick labels, its label; bars for one stage."""

    x: list[float]
    labels: list[str]
    label: str
    bars: bool

    def series(self, ax: Any, ys: list[tuple[str, list[float | None], str]]) -> None:
        _series(ax, self.x, self.labels, ys, self.bars)


def _qps_figure(data: RunData, axis: _Axis, ceiling: int | None, plt: Any) -> Any:
    """QPS vs concurrency, the ceiling the diagnosis found marked."""
    fig, ax = plt.subplots(figsize=(7, 4))
    axis.series(ax, [("QPS", [r.qps for r in data.rows], "C0-")])
    if ceiling is not None and not axis.bars:
        i = [r.stage for r in data.rows].index(ceiling)
        ax.axvline(axis.x[i], color="C3", ls="--", alpha=0.7)
        ax.annotate(
            f"ceiling {data.rows[i].qps:.1f} QPS",
            (axis.x[i], data.rows[i].qps or 0),
            color="C3",
            textcoords="offset points",
            xytext=(-10, -25),
            ha="right",
        )
    ax.set(title="Requests per second vs concurrency", xlabel=axis.label, ylabel="QPS")
    ax.legend(loc="upper left")
    return fig


def _latency_figure(data: RunData, axis: _Axis, plt: Any) -> Any:
    """TTFT (ms) and end-to-end (s) percentiles vs concurrency, side by side."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    axis.series(
        a1,
        [
            ("TTFT p50", _ms_list([r.ttft_p50 for r in data.rows]), "C0-"),
            ("TTFT p99", _ms_list([r.ttft_p99 for r in data.rows]), "C3-"),
        ],
    )
    a1.set(title="Time to first token vs concurrency", xlabel=axis.label, ylabel="ms")
    a1.legend()
    axis.series(
        a2,
        [
            ("E2E p50", [r.e2e_p50 for r in data.rows], "C0-"),
            ("E2E p99", [r.e2e_p99 for r in data.rows], "C3-"),
        ],
    )
    a2.set(title="End-to-end latency vs concurrency", xlabel=axis.label, ylabel="s")
    a2.legend()
    fig.tight_layout()
    return fig


def _throughput_figure(data: RunData, axis: _Axis, plt: Any) -> Any:
    """The client's output tokens/s, and the server's generation and prompt tokens/s where scraped."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ys = [("client output tok/s", [r.output_tok_s for r in data.rows], "C0-")]
    if data.server:
        ys += [
            (
                "server generation tok/s",
                [getattr(data.server.get(r.stage), "generation_tok_s", None) for r in data.rows],
                "C1--",
            ),
            (
                "server prompt tok/s",
                [getattr(data.server.get(r.stage), "prompt_tok_s", None) for r in data.rows],
                "C2:",
            ),
        ]
    axis.series(ax, ys)
    ax.set(title="Token throughput vs concurrency", xlabel=axis.label, ylabel="tokens/s")
    ax.legend()
    return fig


def _ttft_figure(pairs: list[TtftComparison | None], axis: _Axis, plt: Any) -> Any:
    """Client vs server TTFT on the same requests (means, p99), the server p99's bucket shaded."""
    fig, ax = plt.subplots(figsize=(7, 4))

    def side(get: Any) -> list[float | None]:
        return _ms_list([None if p is None else get(p) for p in pairs])

    axis.series(
        ax,
        [
            ("client TTFT mean", side(lambda p: p.client.mean), "C0-"),
            ("server TTFT mean", side(lambda p: p.server.mean), "C0--"),
            ("client TTFT p99", side(lambda p: p.client.quantiles.get("p99")), "C3-"),
            ("server TTFT p99 (interpolated)", side(lambda p: p.server.quantiles.get("p99")), "C3--"),
        ],
    )
    lo = side(lambda p: (p.server.buckets.get("p99") or (None, None))[0])
    hi = side(lambda p: (p.server.buckets.get("p99") or (None, None))[1])
    band = [
        (xi, a, b)
        for xi, a, b in zip(axis.x, lo, hi, strict=True)
        if a is not None and b is not None and b != float("inf")
    ]
    if band and not axis.bars:
        ax.fill_between(
            [b[0] for b in band],
            [b[1] for b in band],
            [b[2] for b in band],
            color="C3",
            alpha=0.12,
            label="server p99's bucket",
        )
    ax.set(title="Client vs server TTFT, the same requests", xlabel=axis.label, ylabel="ms")
    ax.legend()
    return fig


def run_start(data: RunData) -> float:
    """The run's time 0 on the figures' time axes: the earliest of its start, its stages' starts
    and its first scrape."""
    candidates = [data.summary.get("start_s")] + [r.start_s for r in data.rows]
    if data.snapshots:
        candidates.append(min(s.ts for s in data.snapshots))
    return min(c for c in candidates if c is not None) if any(c is not None for c in candidates) else 0.0


def _stage_lines(ax: Any, data: RunData, t0: float) -> None:
    for r in data.rows:
        if r.start_s is not None:
            ax.axvline(r.start_s - t0, color="grey", ls=":", lw=1)
            ax.annotate(
                f"{'~' if data.users_estimated else ''}{r.users}" if r.users is not None else r.label,
                (r.start_s - t0, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                color="grey",
                xytext=(2, -10),
                textcoords="offset points",
            )


def _server_timeline(data: RunData, plt: Any) -> Any:
    t0 = run_start(data)
    snaps = sorted(data.snapshots, key=lambda s: s.ts)
    t = [s.ts - t0 for s in snaps]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    a1.plot(t, [s.running for s in snaps], "C0-", label="running")
    a1.plot(t, [s.waiting for s in snaps], "C3-", label="waiting")
    a1.set(
        title="Server: running and waiting requests over time (dotted: stage starts, labelled with users)",
        ylabel="requests",
    )
    a1.legend(loc="upper left")
    a1.grid(True, alpha=0.3)
    _stage_lines(a1, data, t0)
    kv = [None if s.kv_usage is None else s.kv_usage * 100 for s in snaps]
    if any(v is not None for v in kv):
        a2.plot(t, [math.nan if v is None else v for v in kv], "C2-", label="KV-cache usage %")
        a2.axhline(90, color="C3", ls="--", lw=1, alpha=0.6)
        a2.set_ylim(0, 105)
        a2.legend(loc="upper left")
    else:  # (llama.cpp exposes no KV usage)
        a2.text(0.5, 0.5, "KV-cache usage not exposed by this server", transform=a2.transAxes, ha="center")
    a2.set(xlabel="seconds since start", ylabel="KV usage %")
    a2.grid(True, alpha=0.3)
    _stage_lines(a2, data, t0)
    fig.tight_layout()
    return fig


def _requests_timeline(data: RunData, plt: Any) -> Any:
    df = data.records
    t0 = run_start(data)
    fig, ax = plt.subplots(figsize=(12, 3.5))
    ok = df[df["outcome"] == "ok"]
    ax.scatter(ok["start_wall_s"] - t0, ok["ttft_s"] * 1000, s=2, alpha=0.3, label="TTFT (ok)")
    for label, rows, style in (
        ("failed", df[~df["outcome"].isin(["ok", *CUT])], {"marker": "x", "color": "C3", "s": 8}),
        ("cancelled", df[df["outcome"] == "cancelled"], {"marker": "v", "color": "C1", "s": 14}),
        ("hung up", df[df["outcome"] == "cancelled_by_client"], {"marker": "^", "color": "C2", "s": 14}),
    ):  # cut by the swarm's own stop or ramp-down, or by the client (--cancel): neither ok nor failed
        if len(rows):
            ax.scatter(rows["start_wall_s"] - t0, [0] * len(rows), label=f"{label} ({len(rows)})", **style)
    ax.set(
        title="Every request's TTFT by send time (dotted: stage starts)",
        xlabel="seconds since start",
        ylabel="TTFT ms",
    )
    ax.legend(loc="upper left")
    ax.grid(True, alpha=0.3)
    _stage_lines(ax, data, t0)
    fig.tight_layout()
    return fig
