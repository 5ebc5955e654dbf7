"""report.html's interactive charts (swarm/analysis/interactive.py) from a loaded run (`RunData`).

The same figures as the PNGs (swarm/analysis/plots.py) and more: QPS, latency and throughput vs
concurrency (x ticks at the stages' own loads, thinned where close loads would collide), client vs
server TTFT; on one linked time axis (`TIME`: shared cursor and zoom, stage starts marked) the
client's per-second timeline (requests sent, finished, failed and in flight; TTFT p50 and max;
output tokens/s), every request's TTFT by send time, the server's running/waiting requests and
KV-cache usage; and the per-request timeline: one bar per request, a window of `WINDOW_REQUESTS`
requests per stage (the busiest stage shown first), split into queue, prefill and decode from the
simulator's trace (sim-trace.jsonl, where the run has one) or else into the client's wait for the
first token and its streaming.

Size: the timeline is bucketed per second; the per-request TTFT points are at most `MAX_POINTS`
(evenly thinned beyond, said in the caption); the request windows hold at most
`MAX_WINDOW_BARS` bars in all. A 10,000-request run's page stays well under 3 MB.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from swarm.analysis.finding import Finding
from swarm.analysis.interactive import Bar, Chart, Mark, Series, Timeline, Window
from swarm.analysis.plots import CUT, run_start, stage_axis
from swarm.analysis.rundir import RunData, read_trace_times
from swarm.core.units import stage_number

TIME = "time"  # the sync key of the charts on the run's time axis
MAX_POINTS = 20_000  # per-request TTFT points at most
WINDOW_REQUESTS = 200  # requests per stage's window in the per-request timeline
MAX_WINDOW_BARS = 6_000  # bars in all windows together (a long search: fewer per stage)
SERVER_POINTS = 5_000  # server scrapes at most (evenly thinned beyond)


def report_charts(data: RunData, found: Sequence[Finding]) -> list[Chart | Timeline]:
    """The charts the run has data for, in reading order."""
    charts: list[Chart | Timeline] = []
    if data.rows:
        charts.extend(_vs_concurrency(data, found))
    t0 = run_start(data)
    marks = stage_marks(data, t0)
    if data.records is not None and len(data.records):
        data = dataclasses.replace(data, records=_complete(data.records))
        charts.extend(_client_timeline(data, t0, marks))
    if data.snapshots:
        charts.extend(_server_timeline(data, t0, marks))
    if data.records is not None and len(data.records):
        timeline = request_timeline(data, t0, marks)
        if timeline is not None:
            charts.append(timeline)
    return charts


def stage_marks(data: RunData, t0: float) -> list[Mark]:
    """A mark at each stage's start, labelled with its users (its number without)."""
    mark = "~" if data.users_estimated else ""
    return [
        Mark(r.start_s - t0, f"{mark}{r.users}" if r.users is not None else str(stage_number(r.stage)))
        for r in sorted(data.rows, key=lambda r: r.start_s or 0.0)
        if r.start_s is not None
    ]


def _vs_concurrency(data: RunData, found: Sequence[Finding]) -> list[Chart]:
    rows = (
        sorted(data.rows, key=lambda r: (r.users or 0, r.stage)) if data.summary.get("search") else data.rows
    )
    data = dataclasses.replace(data, rows=rows)
    x, _labels, label = stage_axis(data)
    if sorted(x) != x:  # (stage numbers in run order, or loads in search order: both ascend)
        return []
    one = len(rows) == 1
    ms = 1000.0

    def col(get: Any, scale: float = 1.0) -> list[float | None]:
        return [None if (v := get(r)) is None else v * scale for r in rows]

    out: list[Chart] = []
    if not one:
        ceiling = next((f.stage for f in found if f.kind == "saturation"), None)
        marks = [Mark(x[i], "ceiling") for i, r in enumerate(rows) if r.stage == ceiling]
        out.append(
            Chart("chart-qps", "Requests per second vs concurrency.", x, [Series("QPS", col(lambda r: r.qps))],
                  label, "QPS", marks=marks, x_at_data=True,
                  caption="The dotted line marks the ceiling the diagnosis found.")
        )  # fmt: skip
        out.append(
            Chart("chart-ttft", "Time to first token vs concurrency (client).", x,
                  [Series("TTFT p50 ms", col(lambda r: r.ttft_p50, ms)),
                   Series("TTFT p99 ms", col(lambda r: r.ttft_p99, ms), color="#d62728")],
                  label, "ms", x_at_data=True)
        )  # fmt: skip
        out.append(
            Chart("chart-e2e", "End-to-end latency vs concurrency (client).", x,
                  [Series("E2E p50 s", col(lambda r: r.e2e_p50)),
                   Series("E2E p99 s", col(lambda r: r.e2e_p99), color="#d62728")],
                  label, "s", x_at_data=True)
        )  # fmt: skip
    tput = [Series("client output tok/s", col(lambda r: r.output_tok_s))]
    if data.server:
        tput += [
            Series("server generation tok/s", col(lambda r: getattr(data.server.get(r.stage), "generation_tok_s", None)), dash=True),
            Series("server prompt tok/s", col(lambda r: getattr(data.server.get(r.stage), "prompt_tok_s", None)), dash=True),
        ]  # fmt: skip
    out.append(
        Chart(
            "chart-throughput", "Token throughput vs concurrency.", x, tput, label, "tokens/s", x_at_data=True
        )
    )
    pairs = [data.ttft_pairs.get(r.stage) for r in rows]
    if any(p is not None for p in pairs):

        def side(get: Any) -> list[float | None]:
            return [None if p is None or (v := get(p)) is None else v * ms for p in pairs]

        bucket = [None if p is None else p.server.buckets.get("p99") for p in pairs]
        finite = [b if b is not None and b[1] != float("inf") else None for b in bucket]
        out.append(
            Chart("chart-client-server-ttft", "Client vs server TTFT, the same requests.", x,
                  [Series("client TTFT mean", side(lambda p: p.client.mean)),
                   Series("server TTFT mean", side(lambda p: p.server.mean), dash=True),
                   Series("client TTFT p99", side(lambda p: p.client.quantiles.get("p99")), color="#d62728"),
                   Series("server TTFT p99 (interpolated)", side(lambda p: p.server.quantiles.get("p99")),
                          color="#d62728", dash=True),
                   Series("server p99 bucket low", [None if b is None else b[0] * ms for b in finite], color="#f4b6b6"),
                   Series("server p99 bucket high", [None if b is None else b[1] * ms for b in finite], color="#f4b6b6")],
                  label, "ms", band=(4, 5), x_at_data=True,
                  caption="The shaded band is the histogram bucket the server's p99 was interpolated in.")
        )  # fmt: skip
    return out


# What the charts read of a record, and what a record file without the column says of it (an
# older or hand-made file: the charts draw from what is there instead of failing the page)
RECORD_DEFAULTS: dict[str, object] = {
    "e2e_s": float("nan"),
    "ttft_s": float("nan"),
    "outcome": "ok",
    "output_tokens": 0,
    "stage": float("nan"),
    "request_id": None,
}


def _complete(df: Any) -> Any:
    """The records with every column the charts read (RECORD_DEFAULTS where a file lacks one)."""
    missing = {k: v for k, v in RECORD_DEFAULTS.items() if k not in df.columns}
    return df.assign(**missing) if missing else df


def _client_timeline(data: RunData, t0: float, marks: list[Mark]) -> list[Chart]:
    """Per-second buckets of the client's records, and every request's TTFT by send time."""
    import numpy as np

    df = data.records
    sent = df["start_wall_s"].to_numpy(dtype=float) - t0
    e2e = df["e2e_s"].to_numpy(dtype=float)
    ended = sent + np.where(np.isfinite(e2e), e2e, 0.0)
    outcome = df["outcome"].to_numpy()
    ok = outcome == "ok"
    failed = ~ok & ~np.isin(outcome, list(CUT))
    ttft_ms = df["ttft_s"].to_numpy(dtype=float) * 1000
    tokens = df["output_tokens"].fillna(0).to_numpy(dtype=float)
    start = float(np.floor(min(sent.min(), 0.0)))
    n = int(np.ceil(max(ended.max(), sent.max()) - start)) + 1
    at_send = np.clip((sent - start).astype(int), 0, n - 1)
    at_end = np.clip((ended - start).astype(int), 0, n - 1)
    x = [start + i for i in range(n)]
    sent_n = np.bincount(at_send, minlength=n)
    done_n = np.bincount(at_end[ok], minlength=n)
    fail_n = np.bincount(at_end[failed], minlength=n)
    in_flight = np.cumsum(sent_n) - np.cumsum(np.bincount(at_end, minlength=n))
    tok_s = np.bincount(at_end[ok], weights=tokens[ok], minlength=n)
    p50: list[float | None] = [None] * n
    top: list[float | None] = [None] * n
    good = ok & np.isfinite(ttft_ms)
    order = np.argsort(at_send[good], kind="stable")
    secs, values = at_send[good][order], ttft_ms[good][order]
    bounds = np.searchsorted(secs, np.arange(n + 1))
    for i in range(n):
        chunk = values[bounds[i] : bounds[i + 1]]
        if len(chunk):
            p50[i], top[i] = float(np.median(chunk)), float(chunk.max())
    charts = [
        Chart("chart-requests-per-s", "Client: requests per second and in flight, over time.", x,
              [Series("sent/s", sent_n.tolist()), Series("finished ok/s", done_n.tolist()),
               Series("failed/s", fail_n.tolist(), color="#d62728"),
               Series("in flight (end of second)", in_flight.tolist(), color="#7f7f7f", axis="y2")],
              "seconds since start", "requests/s", y2_label="in flight", marks=marks, sync=TIME,
              caption="Per-second buckets of the request records (sent by send time, finished by end time); "
              "dotted: stage starts, labelled with users.", y_min=0),
        Chart("chart-ttft-per-s", "Client: TTFT per second of send time.", x,
              [Series("TTFT p50 ms", p50), Series("TTFT max ms", top, color="#d62728"),
               Series("output tok/s", tok_s.tolist(), color="#2ca02c", axis="y2")],
              "seconds since start", "ms", y2_label="tokens/s", marks=marks, sync=TIME, y_min=0),
    ]  # fmt: skip
    order = np.argsort(sent, kind="stable")
    step = max(1, -(-len(order) // MAX_POINTS))
    keep = order[::step]
    thinned = f" Every {step}th request of {len(order)} is drawn." if step > 1 else ""
    cut = np.isin(outcome, list(CUT))
    series = [Series("TTFT ms (ok)", np.where(ok[keep], ttft_ms[keep], np.nan).tolist(), points=True)]
    for label, which, color in (("failed (at 0)", failed, "#d62728"), ("cut (at 0)", cut, "#ff7f0e")):
        if which[keep].any():
            series.append(
                Series(label, np.where(which[keep], 0.0, np.nan).tolist(), points=True, color=color)
            )
    charts.append(
        Chart("chart-requests-ttft", "Every request's TTFT by send time.", sent[keep].tolist(), series,
              "seconds since start", "TTFT ms", marks=marks, sync=TIME,
              caption="Failed and cut (cancelled, hung up) requests at 0." + thinned)
    )  # fmt: skip
    return charts


def _server_timeline(data: RunData, t0: float, marks: list[Mark]) -> list[Chart]:
    snaps = sorted(data.snapshots, key=lambda s: s.ts)
    snaps = snaps[:: max(1, -(-len(snaps) // SERVER_POINTS))]
    x = [s.ts - t0 for s in snaps]
    charts = [
        Chart("chart-server-queue", "Server: running and waiting requests over time.", x,
              [Series("running", [s.running for s in snaps]), Series("waiting", [s.waiting for s in snaps], color="#d62728")],
              "seconds since start", "requests", marks=marks, sync=TIME, y_min=0,
              caption=f"From {data.source}'s /metrics, one point per scrape.")
    ]  # fmt: skip
    kv = [None if s.kv_usage is None else s.kv_usage * 100 for s in snaps]
    if any(v is not None for v in kv):
        charts.append(
            Chart("chart-server-kv", "Server: KV-cache usage over time.", x, [Series("KV-cache usage %", kv, color="#2ca02c")],
                  "seconds since start", "%", marks=marks, sync=TIME, y_min=0, y_max=105)
        )  # fmt: skip
    return charts


def request_timeline(data: RunData, t0: float, marks: list[Mark]) -> Timeline | None:
    """One bar per request, a window per stage (its first requests by send time), the busiest
    stage's first; phases from the simulator's trace where it has the request."""
    df = data.records.sort_values("start_wall_s", kind="stable")
    stages = sorted(int(s) for s in df["stage"].dropna().unique())
    if not stages:
        return None
    per = max(20, min(WINDOW_REQUESTS, MAX_WINDOW_BARS // len(stages)))
    picked = {s: df[df["stage"] == s].head(per) for s in stages}
    ids = {str(i) for part in picked.values() for i in part["request_id"].dropna()}
    trace = read_trace_times(data.directory, ids)
    rows = {r.stage: r for r in data.rows}
    windows, busiest, best = [], 0, -1.0
    phases = ["queue", "prefill", "decode"] if trace else ["to first token (client)", "streaming (client)"]
    for i, s in enumerate(stages):
        part = picked[s]
        bars = []
        for rec in part.itertuples(index=False):
            start = rec.start_wall_s - t0
            e2e = rec.e2e_s if rec.e2e_s == rec.e2e_s and rec.e2e_s is not None else 0.0
            t = trace.get(str(rec.request_id)) if trace else None
            if t is not None:
                bounds = [None if v is None else v - t0 for v in t]
            elif trace:
                bounds = [None] * 4  # not in the trace: the client's extent only
            else:
                ttft = rec.ttft_s if rec.ttft_s == rec.ttft_s else None
                bounds = [start, None if ttft is None else start + ttft, start + e2e]
            bars.append(Bar(str(rec.request_id or ""), str(rec.outcome), start, start + e2e, bounds))
        row = rows.get(s)
        name = row.label if row is not None else f"stage {stage_number(s)}"
        windows.append(Window(f"stage {stage_number(s)}: {name}, first {len(bars)} requests", bars))
        qps = row.qps if row is not None and row.qps is not None else len(part)
        if qps > best:
            busiest, best = i, qps
    source = (
        "queue, prefill and decode from the simulator's trace (sim-trace.jsonl; grey where a request "
        "is not in it)"
        if trace
        else "the client's wait for its first token, then its streaming (no server trace in this run)"
    )
    return Timeline(
        "chart-request-timeline",
        "Per-request timeline.",
        phases,
        windows,
        selected=busiest,
        caption=f"Each bar a request, in send order: {source}; its whole extent as the client saw it in "
        "light grey, outlined red when not ok. Pick a stage's window; hover for a request's numbers.",
        sync=TIME,
        marks=marks,
    )
