"""`swarm report DIR`: DIR/report.html (self-contained) + the main plots as PNGs + DIR/stages.csv.

Rendered from the run's files only, so it can be re-rendered at any time:
- `summary.json` (swarm/stats/summary.py): per-stage client blocks, run metadata, SLO objectives;
- `requests.parquet` (or `records/*.parquet`): per-request records (swarm/live/recorder.py SCHEMA);
- `server_metrics.jsonl` (swarm/analysis/server_metrics.py ServerPoller): the target's /metrics scrapes;
- `client_cpu.jsonl` (swarm/orchestrate/run.py CpuSampler): worker CPU samples.

Every piece may be missing: the report says what it lacks and shows the rest. The HTML embeds
its PNGs as data URIs and inline CSS: no script, font or stylesheet from the network.

`stage_rows()` is the only place that knows the summary's stage layout.
"""

from __future__ import annotations

import argparse
import base64
import html
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.analysis.diagnosis import Finding, StageRow, cpu_by_stage, diagnose, ttft_gap
from swarm.analysis.server_metrics import (
    ServerSnapshot,
    StageServerStats,
    read_snapshots,
    stage_stats,
    window_stats,
)

REPORT = "report.html"
STAGES_CSV = "stages.csv"
PNGS = (
    "qps_vs_concurrency.png",
    "latency_vs_concurrency.png",
    "throughput.png",
    "server_timeline.png",
    "client_vs_server_ttft.png",
    "requests_timeline.png",
)


# ---------------------------------------------------------------------------------------- loading


@dataclass
class RunData:
    directory: Path
    summary: dict[str, Any]
    records: Any  # pandas.DataFrame or None
    snapshots: list[ServerSnapshot]
    cpu: list[dict[str, Any]]
    rows: list[StageRow] = field(default_factory=list)
    server: dict[int, StageServerStats] = field(default_factory=dict)
    run_server: StageServerStats | None = None
    users_estimated: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.summary.get("run_id") or self.directory.name)

    @property
    def source(self) -> str:
        return self.snapshots[0].source if self.snapshots else "none"


def _read_records(directory: Path) -> Any:
    import pandas as pd

    path = directory / "requests.parquet"
    if path.exists():
        return pd.read_parquet(path)
    if (directory / "records").is_dir():
        from swarm.live import recorder

        table = recorder.read_table(directory / "records")
        return table.to_pandas() if table.num_rows else None
    return None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a killed run
    return out


def _block_from_records(df: Any, duration_s: float | None) -> dict[str, Any]:
    """A summary-style block computed exactly from records (when the summary lacks one)."""
    import numpy as np

    failures = df.loc[df["outcome"] != "ok", "outcome"].value_counts().to_dict()
    good = df[(df["outcome"] == "ok") & ~df["warmup"].fillna(False).astype(bool)]
    out: dict[str, Any] = {
        "requests": len(df),
        "failures": {k: int(v) for k, v in failures.items()},
        "prompt_tokens": int(df["prompt_tokens"].fillna(0).sum()),
        "output_tokens": int(df["output_tokens"].fillna(0).sum()),
        "reasoning_tokens": int(df["reasoning_tokens"].fillna(0).sum()),
    }
    out["qps"] = len(df) / duration_s if duration_s else 0.0
    out["output_tok_s"] = out["output_tokens"] / duration_s if duration_s else 0.0
    for name in ("ttft", "ttfa", "tpot", "e2e"):
        v = good[f"{name}_s"].dropna().to_numpy()
        out[f"{name}_s"] = _stats(v, np)
    itl = (
        np.concatenate([np.asarray(x, dtype=float) for x in good["itl_s"] if x is not None and len(x)])
        if len(good)
        else np.array([])
    )
    out["itl_s"] = _stats(itl, np)
    return out


def _stats(v: Any, np: Any) -> dict[str, float | None]:
    if not len(v):
        return dict.fromkeys(("p50", "p90", "p95", "p99", "mean", "max"))
    out = {
        k: float(np.percentile(v, q, method="lower"))
        for k, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99))
    }
    out["mean"], out["max"] = float(np.mean(v)), float(np.max(v))
    return out


def _peak_in_flight(df: Any) -> int:
    """Most requests in flight at once (closed loop: the stage's user count)."""
    ends = df["start_wall_s"] + df["e2e_s"].fillna(0.0)
    events = sorted(
        [(t, 1) for t in df["start_wall_s"]] + [(t, -1) for t in ends], key=lambda e: (e[0], e[1])
    )
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def stage_rows(summary: Mapping[str, Any], records: Any = None) -> tuple[list[StageRow], bool]:
    """Summary stage entries (+ records where the summary lacks something) -> StageRows.

    Reads per entry: `stage`, `duration_s`, `total` (a block), and `users`, `start_s`/`end_s`
    (or `start_wall_s`/`end_wall_s`), `warmup_s` when present; a top-level `stage_timeline`
    ([{index, users, start_wall_s, end_wall_s, warmup_s}], swarm.live.shape) is used too. What is
    still missing comes from the records: window = first send to the next stage's first send
    (the last stage: its last finish), users = peak in flight (flagged as estimated).
    Returns (rows, users_estimated).
    """
    timeline = {int(t.get("index", t.get("stage", 0))): t for t in summary.get("stage_timeline") or []}
    entries = {int(e.get("stage", e.get("index", 0))): dict(e) for e in summary.get("stages") or []}
    if records is not None and len(records):
        for s in sorted(set(int(x) for x in records["stage"].dropna().unique()) - set(entries)):
            entries[s] = {"stage": s}
    if not entries and summary.get("total"):
        entries[0] = {
            "stage": 0,
            "duration_s": summary.get("duration_s"),
            "total": summary["total"],
            "start_s": summary.get("start_s"),
            "end_s": summary.get("end_s"),
            "users": summary.get("users"),
        }
    rows, estimated = [], False
    derived_end: set[int] = set()
    for idx in sorted(entries):
        e, t = entries[idx], timeline.get(idx, {})
        sub = records[records["stage"] == idx] if records is not None and len(records) else None
        start = e.get("start_s", e.get("start_wall_s", t.get("start_wall_s")))
        end = e.get("end_s", e.get("end_wall_s", t.get("end_wall_s")))
        if (start is None or end is None) and sub is not None and len(sub):
            start = float(sub["start_wall_s"].min()) if start is None else start
            if end is None:
                end = float((sub["start_wall_s"] + sub["e2e_s"].fillna(0)).max())
                derived_end.add(idx)
        users = e.get("users", t.get("users"))
        if users is None and sub is not None and len(sub):
            users, estimated = _peak_in_flight(sub), True
        duration = e.get("duration_s") or (end - start if start is not None and end is not None else None)
        block = e.get("total")
        if block is None and sub is not None and len(sub):
            block = _block_from_records(sub, duration)
            e["total"] = block
        block = block or {}
        lat = {k: block.get(f"{k}_s") or {} for k in ("ttft", "e2e", "tpot", "itl")}
        rows.append(
            StageRow(
                stage=idx,
                users=None if users is None else int(users),
                start_s=start,
                end_s=end,
                warmup_s=float(e.get("warmup_s", t.get("warmup_s", 0.0)) or 0.0),
                duration_s=duration,
                requests=int(block.get("requests", 0)),
                failures=int(sum((block.get("failures") or {}).values())),
                qps=block.get("qps"),
                output_tok_s=block.get("output_tok_s"),
                prompt_tokens=int(block.get("prompt_tokens") or 0),
                output_tokens=int(block.get("output_tokens") or 0),
                ttft_p50=lat["ttft"].get("p50"),
                ttft_p99=lat["ttft"].get("p99"),
                e2e_p50=lat["e2e"].get("p50"),
                e2e_p99=lat["e2e"].get("p99"),
                tpot_p50=lat["tpot"].get("p50"),
                itl_p99=lat["itl"].get("p99"),
                entry=e,
            )
        )
    for row, nxt in itertools.pairwise(rows):  # a derived window ends where the next stage starts
        if (
            row.stage in derived_end
            and nxt.start_s is not None
            and row.end_s is not None
            and nxt.start_s < row.end_s
        ):
            row.end_s = nxt.start_s
    return rows, estimated


def slo_text(summary: Mapping[str, Any]) -> str | None:
    """The run's --slo objectives, from the summary's verdicts."""
    parts = [
        v.get("objective") for v in summary.get("slo") or [] if isinstance(v, Mapping) and v.get("objective")
    ]
    return ",".join(parts) if parts else None


def load_run(directory: Path) -> RunData:
    directory = Path(directory)
    summary_path = directory / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    data = RunData(
        directory,
        summary,
        _read_records(directory),
        read_snapshots(directory / "server_metrics.jsonl"),
        _read_jsonl(directory / "client_cpu.jsonl"),
    )
    if not summary:
        data.notes.append("no summary.json: client numbers computed from the request records")
    if data.records is None:
        data.notes.append("no request records (requests.parquet): no per-request timeline")
    data.rows, data.users_estimated = stage_rows(summary, data.records)
    if data.users_estimated:
        data.notes.append(
            "the summary has no user count per stage: users estimated as the peak of "
            "requests in flight (marked ~)"
        )
    if data.snapshots:
        windows = [
            (r.stage, r.start_s + r.warmup_s, r.end_s)
            for r in data.rows
            if r.start_s is not None and r.end_s is not None
        ]
        data.server = stage_stats(data.snapshots, windows)
        snaps = sorted(data.snapshots, key=lambda s: s.ts)
        data.run_server = window_stats(snaps, -1, snaps[0].ts, snaps[-1].ts)
    else:
        data.notes.append(
            "no server metrics (server_metrics.jsonl): the target exposed no /metrics or none "
            "were scraped; client-side numbers only"
        )
    if not data.cpu and "workers" in summary:
        data.notes.append(
            "no worker CPU samples (client_cpu.jsonl): client saturation from the workers' own "
            "CPU reports in summary.json; no CPU column"
        )
    elif not data.cpu:
        data.notes.append("no worker CPU samples (client_cpu.jsonl): client saturation not checked")
    return data


def findings(data: RunData, slo: str | None = None) -> list[Finding]:
    return diagnose(
        data.rows,
        data.server,
        source=data.source,
        cpu=data.cpu,
        slo_text=slo or slo_text(data.summary),
        run_server=data.run_server,
        client_total=data.summary.get("total") or _records_total(data),
        client_last_end=_last_end(data),
        bound_reported=data.summary.get("client_bound", ()),
    )


def _last_end(data: RunData) -> float | None:
    df = data.records
    if df is None or not len(df):
        return None
    return float((df["start_wall_s"] + df["e2e_s"].fillna(0.0)).max())


def _records_total(data: RunData) -> dict[str, Any]:
    if data.records is None or not len(data.records):
        return {}
    return _block_from_records(data.records, None)


# ---------------------------------------------------------------------------------------- stage table


def stage_table(data: RunData) -> Any:
    """One row per stage: client numbers, server numbers, client CPU (the stages.csv columns)."""
    import pandas as pd

    cpu = cpu_by_stage(data.rows, data.cpu)
    out = []
    for r in data.rows:
        s = data.server.get(r.stage)
        lat = s.latency if s else {}
        row: dict[str, Any] = {
            "stage": r.stage,
            "users": r.users,
            "duration_s": r.duration_s,
            "requests": r.requests,
            "failures": r.failures,
            "qps": r.qps,
            "output_tok_s": r.output_tok_s,
            "ttft_p50_s": r.ttft_p50,
            "ttft_p99_s": r.ttft_p99,
            "e2e_p50_s": r.e2e_p50,
            "e2e_p99_s": r.e2e_p99,
            "tpot_p50_s": r.tpot_p50,
            "itl_p99_s": r.itl_p99,
            "client_cpu_max_pct": cpu.get(r.stage),
        }
        if s is not None:
            row.update(
                {
                    "srv_running_mean": s.running_mean,
                    "srv_running_max": s.running_max,
                    "srv_waiting_mean": s.waiting_mean,
                    "srv_waiting_max": s.waiting_max,
                    "srv_kv_mean": s.kv_mean,
                    "srv_kv_max": s.kv_max,
                    "srv_preemptions": s.preemptions,
                    "srv_prefix_hit_rate": s.prefix_hit_rate,
                    "srv_prompt_tok_s": s.prompt_tok_s,
                    "srv_generation_tok_s": s.generation_tok_s,
                    "srv_requests": s.requests,
                    "srv_finish_reasons": json.dumps(s.finish_reasons) if s.finish_reasons else None,
                    "srv_spec_acceptance_rate": s.spec_acceptance_rate,
                    "srv_spec_mean_acceptance_length": s.spec_mean_acceptance_length,
                }
            )
            for key in ("ttft", "itl", "e2e", "queue"):
                for q in ("p50", "p99"):
                    row[f"srv_{key}_{q}_s"] = (lat.get(key) or {}).get(q)
        out.append(row)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------- plots


def _x(data: RunData) -> tuple[list[float], list[str], str]:
    users = [r.users for r in data.rows]
    if all(u is not None for u in users) and len(set(users)) == len(users):
        mark = "~" if data.users_estimated else ""
        return (
            [float(u) for u in users],
            [f"{mark}{u}" for u in users],
            "concurrent users" + (" (estimated)" if data.users_estimated else ""),
        )
    return [float(r.stage) for r in data.rows], [str(r.stage) for r in data.rows], "stage"


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
        ax.set_xticks(x, labels)
    ax.grid(True, alpha=0.3)


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
    x, labels, xlabel = _x(data)
    bars = len(data.rows) == 1
    ceiling = next((f.stage for f in found if f.kind == "saturation"), None)

    fig, ax = plt.subplots(figsize=(7, 4))
    _series(ax, x, labels, [("QPS", [r.qps for r in data.rows], "C0-")], bars)
    if ceiling is not None and not bars:
        i = [r.stage for r in data.rows].index(ceiling)
        ax.axvline(x[i], color="C3", ls="--", alpha=0.7)
        ax.annotate(
            f"ceiling {data.rows[i].qps:.1f} QPS",
            (x[i], data.rows[i].qps or 0),
            color="C3",
            textcoords="offset points",
            xytext=(-10, -25),
            ha="right",
        )
    ax.set(title="Requests per second vs concurrency", xlabel=xlabel, ylabel="QPS")
    ax.legend(loc="upper left")
    figs["qps_vs_concurrency.png"] = fig

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    _series(
        a1,
        x,
        labels,
        [
            ("TTFT p50", _ms_list([r.ttft_p50 for r in data.rows]), "C0-"),
            ("TTFT p99", _ms_list([r.ttft_p99 for r in data.rows]), "C3-"),
        ],
        bars,
    )
    a1.set(title="Time to first token vs concurrency", xlabel=xlabel, ylabel="ms")
    a1.legend()
    _series(
        a2,
        x,
        labels,
        [
            ("E2E p50", [r.e2e_p50 for r in data.rows], "C0-"),
            ("E2E p99", [r.e2e_p99 for r in data.rows], "C3-"),
        ],
        bars,
    )
    a2.set(title="End-to-end latency vs concurrency", xlabel=xlabel, ylabel="s")
    a2.legend()
    fig.tight_layout()
    figs["latency_vs_concurrency.png"] = fig

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
    _series(ax, x, labels, ys, bars)
    ax.set(title="Token throughput vs concurrency", xlabel=xlabel, ylabel="tokens/s")
    ax.legend()
    figs["throughput.png"] = fig

    if data.snapshots:
        figs["server_timeline.png"] = _server_timeline(data, plt)
        gaps = [data.server.get(r.stage) for r in data.rows]
        if any(g is not None and g.latency.get("ttft") for g in gaps):
            fig, ax = plt.subplots(figsize=(7, 4))
            srv = [(g.latency.get("ttft") or {}) if g else {} for g in gaps]
            _series(
                ax,
                x,
                labels,
                [
                    ("client TTFT p50", _ms_list([r.ttft_p50 for r in data.rows]), "C0-"),
                    ("server TTFT p50", _ms_list([s.get("p50") for s in srv]), "C0--"),
                    ("client TTFT p99", _ms_list([r.ttft_p99 for r in data.rows]), "C3-"),
                    ("server TTFT p99", _ms_list([s.get("p99") for s in srv]), "C3--"),
                ],
                bars,
            )
            ax.set(title="Client vs server TTFT", xlabel=xlabel, ylabel="ms")
            ax.legend()
            figs["client_vs_server_ttft.png"] = fig
    if data.records is not None and len(data.records):
        figs["requests_timeline.png"] = _requests_timeline(data, plt)
    return figs


def _t0(data: RunData) -> float:
    candidates = [data.summary.get("start_s")] + [r.start_s for r in data.rows]
    if data.snapshots:
        candidates.append(min(s.ts for s in data.snapshots))
    return min(c for c in candidates if c is not None) if any(c is not None for c in candidates) else 0.0


def _stage_lines(ax: Any, data: RunData, t0: float) -> None:
    for r in data.rows:
        if r.start_s is not None:
            ax.axvline(r.start_s - t0, color="grey", ls=":", lw=1)
            ax.annotate(
                f"{'~' if data.users_estimated else ''}{r.users if r.users is not None else r.stage}",
                (r.start_s - t0, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                color="grey",
                xytext=(2, -10),
                textcoords="offset points",
            )


def _server_timeline(data: RunData, plt: Any) -> Any:
    t0 = _t0(data)
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
    else:
        a2.text(0.5, 0.5, "KV-cache usage not exposed by this server", transform=a2.transAxes, ha="center")
    a2.set(xlabel="seconds since start", ylabel="KV usage %")
    a2.legend(loc="upper left")
    a2.grid(True, alpha=0.3)
    _stage_lines(a2, data, t0)
    fig.tight_layout()
    return fig


def _requests_timeline(data: RunData, plt: Any) -> Any:
    df = data.records
    t0 = _t0(data)
    fig, ax = plt.subplots(figsize=(12, 3.5))
    ok = df[df["outcome"] == "ok"]
    bad = df[df["outcome"] != "ok"]
    ax.scatter(ok["start_wall_s"] - t0, ok["ttft_s"] * 1000, s=2, alpha=0.3, label="TTFT (ok)")
    if len(bad):
        ax.scatter(
            bad["start_wall_s"] - t0,
            [0] * len(bad),
            s=8,
            marker="x",
            color="C3",
            label=f"failed ({len(bad)})",
        )
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


# ---------------------------------------------------------------------------------------- HTML

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left} tr.untrusted td{background:#fff0f0}
ul.findings li{margin:5px 0} .k{font-weight:600;font-family:monospace;font-size:12px;color:#555}
li.untrusted{color:#a00} .note{color:#8a5a00;font-size:13px} figure{margin:12px 0}
figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:12px;color:#555}
"""


def _fmt(v: Any, kind: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if kind == "ms":
        return f"{v * 1000:.0f}" if v < 10 else f"{v * 1000:,.0f}"
    if kind == "pct":
        return f"{v * 100:.0f}%"
    if kind == "int":
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return html.escape(str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], row_class: Sequence[str] = ()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"


def _stage_html(data: RunData, found: Sequence[Finding]) -> str:
    untrusted = {f.stage for f in found if not f.trusted and f.kind == "client_bound"}
    cpu = cpu_by_stage(data.rows, data.cpu)
    header = [
        "stage",
        "users",
        "req",
        "fail",
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
    rows, classes = [], []
    for r in data.rows:
        s = data.server.get(r.stage)
        users = "-" if r.users is None else f"{'~' if data.users_estimated else ''}{r.users}"

        def pair(a: Any, b: Any, kind: str = "") -> str:
            return "-" if a is None and b is None else f"{_fmt(a, kind)} / {_fmt(b, kind)}"

        rows.append(
            [
                str(r.stage),
                users,
                _fmt(r.requests, "int"),
                _fmt(r.failures, "int"),
                _fmt(r.qps),
                _fmt(r.output_tok_s),
                _fmt(r.ttft_p50, "ms"),
                _fmt(r.ttft_p99, "ms"),
                "-" if r.e2e_p50 is None else f"{r.e2e_p50:.2f}",
                "-" if r.e2e_p99 is None else f"{r.e2e_p99:.2f}",
                _fmt(r.tpot_p50, "ms"),
                _fmt(r.itl_p99, "ms"),
                pair(s.running_mean, s.running_max) if s else "-",
                pair(s.waiting_mean, s.waiting_max) if s else "-",
                pair(s.kv_mean, s.kv_max, "pct") if s else "-",
                _fmt(s.preemptions, "int") if s else "-",
                _fmt(s.prefix_hit_rate, "pct") if s else "-",
                _fmt(s.generation_tok_s) if s else "-",
                "-" if cpu.get(r.stage) is None else f"{cpu[r.stage]:.0f}%",
            ]
        )
        classes.append("untrusted" if r.stage in untrusted else "")
    return _table(header, rows, classes)


def _client_server_html(data: RunData) -> str:
    header = [
        "stage",
        "users",
        "client TTFT p50",
        "server TTFT p50",
        "gap p50",
        "client TTFT p99",
        "server TTFT p99",
        "gap p99",
        "server queue p50/p99",
        "server ITL p50/p99",
        "server E2E p50/p99",
        "client req",
        "server finished",
        "client out tok",
        "server gen tok",
        "finish reasons",
    ]
    rows = []
    for r in data.rows:
        s = data.server.get(r.stage)
        lat = s.latency if s else {}
        g50, g99 = ttft_gap(r, s)

        def pq(key: str, kind: str = "ms", lat: Mapping[str, Any] = lat) -> str:
            d = lat.get(key) or {}
            return "-" if not d else f"{_fmt(d.get('p50'), kind)} / {_fmt(d.get('p99'), kind)}"

        srv_ttft = lat.get("ttft") or {}
        rows.append(
            [
                str(r.stage),
                "-" if r.users is None else str(r.users),
                _fmt(r.ttft_p50, "ms"),
                _fmt(srv_ttft.get("p50"), "ms"),
                _fmt(g50, "ms"),
                _fmt(r.ttft_p99, "ms"),
                _fmt(srv_ttft.get("p99"), "ms"),
                _fmt(g99, "ms"),
                pq("queue"),
                pq("itl"),
                "-"
                if not lat.get("e2e")
                else f"{lat['e2e']['p50'] or 0:.2f} / {lat['e2e']['p99'] or 0:.2f} s",
                _fmt(r.requests - r.failures, "int"),
                _fmt(s.requests, "int") if s else "-",
                _fmt(r.output_tokens, "int"),
                _fmt(s.generation_tokens, "int") if s else "-",
                html.escape(", ".join(f"{k} {v:,.0f}" for k, v in s.finish_reasons.items())) if s else "-",
            ]
        )
    note = (
        "<p class='meta'>Times in ms. The client attributes a request to the stage it was sent in, the server "
        "to the scrape window it finished in, so per-stage counts differ at stage edges; the run totals are "
        "reconciled in the diagnosis. Server TTFT runs from the engine's arrival time: the gap is the "
        "network, the HTTP front-end and the client. Server percentiles are interpolated inside the "
        "server's histogram buckets (vLLM TTFT: 0.1, 0.25, 0.5, 0.75, 1 s ...), so they are coarse.</p>"
    )
    spec = [
        r
        for r in data.rows
        if data.server.get(r.stage) and data.server[r.stage].spec_acceptance_rate is not None
    ]
    extra = ""
    if spec:
        extra = "<h3>Speculative decoding</h3>" + _table(
            ["stage", "users", "acceptance rate", "mean acceptance length"],
            [
                [
                    str(r.stage),
                    str(r.users),
                    _fmt(data.server[r.stage].spec_acceptance_rate, "pct"),
                    f"{data.server[r.stage].spec_mean_acceptance_length or 0:.2f}",
                ]
                for r in spec
            ],
        )
    return _table(header, rows) + note + extra


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


CAPTIONS = {
    "qps_vs_concurrency.png": "QPS vs concurrency; the dashed line marks the ceiling the diagnosis found.",
    "latency_vs_concurrency.png": "TTFT and end-to-end latency percentiles vs concurrency (client side).",
    "throughput.png": "Token throughput: client output tokens/s and the server's prompt/generation tokens/s.",
    "server_timeline.png": "The server's running/waiting requests and KV-cache usage over time, stage by stage.",
    "client_vs_server_ttft.png": "Client-measured TTFT next to the server's own histogram percentiles.",
    "requests_timeline.png": "Every request's TTFT by the time it was sent.",
}


def render_html(data: RunData, found: Sequence[Finding], pngs: Mapping[str, bytes]) -> str:
    s = data.summary
    meta = [f"run <b>{html.escape(data.name)}</b>"]
    for key, label in (
        ("model_name", "model"),
        ("start_time", "start"),
        ("duration_s", "duration s"),
        ("users", "max users"),
        ("workers", "workers"),
    ):
        if s.get(key) is not None:
            meta.append(f"{label} {_fmt(s[key])}")
    meta.append(f"server metrics: {data.source} ({len(data.snapshots)} scrapes)")
    if s.get("degraded"):
        meta.append("<span class='note'>DEGRADED: a worker was lost during the run</span>")
    lost = s.get("target_unreachable_since_s")
    if lost is not None:
        into = f", {lost - s['start_s']:.1f} s into the run" if s.get("start_s") is not None else ""
        meta.append(
            f"<span class='note'>TARGET UNREACHABLE since {html.escape(str(s.get('target_unreachable_since')))}"
            f"{into}: every later request failed to connect</span>"
        )
    items = (
        "\n".join(
            f"<li class='{'untrusted' if not f.trusted else ''}'><span class='k'>{html.escape(f.kind)}</span> "
            f"{html.escape(f.text)}</li>"
            for f in found
        )
        or "<li>No findings.</li>"
    )
    notes = "".join(f"<p class='note'>Note: {html.escape(n)}.</p>" for n in data.notes)
    figures = "\n".join(
        f"<figure><img alt='{name}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        f"<figcaption>{html.escape(CAPTIONS.get(name, name))} ({name})</figcaption></figure>"
        for name, png in pngs.items()
    )
    failures = (s.get("total") or {}).get("failures") or {}
    failed = ", ".join(f"{k} {v}" for k, v in failures.items() if v) or "none"
    messages = "".join(
        f"<li><span class='k'>{html.escape(outcome)}</span> {e['count']} &times; "
        f"<code>{html.escape(e['message'])}</code></li>"
        for outcome, kept in (s.get("errors") or {}).items()
        for e in kept
    )
    messages = (
        f"<p class='meta'>Error messages (the first distinct ones per outcome):</p><ul>{messages}</ul>"
        if messages
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm report: {html.escape(data.name)}</title>
<style>{CSS}</style></head><body>
<h1>Capacity report</h1>
<p class="meta">{" &middot; ".join(meta)}</p>
{notes}
<h2>Diagnosis</h2>
<ul class="findings">{items}</ul>
<h2>Stages</h2>
{_stage_html(data, found)}
<p class="meta">Failures by outcome (whole run): {html.escape(failed)}. Rows in red: a worker's CPU was over 90%,
the client was the bottleneck and those latencies are not trusted.</p>
{messages}
<h2>Client vs server</h2>
{_client_server_html(data) if data.snapshots else "<p class='note'>No server metrics: nothing to compare.</p>"}
<h2>Plots</h2>
{figures or "<p class='note'>No stage data: nothing to plot.</p>"}
<p class="meta">Generated by <code>swarm report</code> from summary.json, the request records,
server_metrics.jsonl and client_cpu.jsonl; re-render with <code>swarm report {html.escape(str(data.directory))}</code>.</p>
</body></html>
"""


def write_report(directory: Path, slo: str | None = None) -> Path:
    """Render DIR/report.html, the PNGs beside it and DIR/stages.csv. Returns the HTML path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load_run(Path(directory))
    found = findings(data, slo)
    stage_table(data).to_csv(data.directory / STAGES_CSV, index=False)
    pngs = {}
    for name, fig in render_plots(data, found).items():
        pngs[name] = _png(fig)
        (data.directory / name).write_bytes(pngs[name])
        plt.close(fig)
    (data.directory / "diagnosis.json").write_text(
        json.dumps(
            [{"kind": f.kind, "stage": f.stage, "text": f.text, "trusted": f.trusted} for f in found],
            indent=2,
        )
        + "\n"
    )
    path = data.directory / REPORT
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(data, found, pngs), encoding="utf-8")
    tmp.replace(path)
    return path


# ---------------------------------------------------------------------------------------- CLI


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", help="a run's output directory (with summary.json and/or requests.parquet)")
    p.add_argument(
        "--slo",
        help="objectives for the highest-concurrency-meeting-SLO finding "
        "(default: the run's own --slo), e.g. ttft_p99<=800ms",
    )


def main(args: argparse.Namespace) -> int:
    from swarm.core.errors import UsageError

    directory = Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory")
    if not any((directory / n).exists() for n in ("summary.json", "requests.parquet", "records")):
        raise UsageError(f"{directory} holds no run (no summary.json, requests.parquet or records/)")
    if args.slo:
        from swarm.stats import slo

        slo.parse(args.slo)
    path = write_report(directory, args.slo)
    for f in json.loads((directory / "diagnosis.json").read_text()):
        print(("[not trusted] " if not f["trusted"] else "") + f["text"])
    print(f"swarm report: {path}")
    return 0
