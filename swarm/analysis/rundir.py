"""A run directory, loaded: `load_run(DIR)` -> `RunData` (client stage rows, server stats, client CPU).

What a run leaves (every piece may be missing; `RunData.notes` says what is):
- `summary.json` (swarm/stats/summary.py): per-stage client blocks, run metadata, SLO objectives
  (or the master's `summary.part.json`, of a `swarm run` killed before it wrote summary.json);
- `requests.parquet` (or `records/*.parquet`): per-request records (swarm/core/recordfile.py SCHEMA);
- `server_metrics.jsonl` (swarm/orchestrate/pollers.py ServerPoller): the target's /metrics scrapes;
- `client_cpu.jsonl` (written by the Locust master, swarm/live/client_cpu.py): each worker's own CPU
  and wall seconds per stage, one line per report, read back into a `swarm.stats.cpu.ClientLoad`.
- `gpu_metrics.jsonl` (swarm/orchestrate/pollers.py GpuPoller, `--gpu-metrics`): dcgm-exporter scrapes,
  per stage and GPU in `RunData.gpus`.
- several endpoints (`--host URL1,URL2`): `endpoints.json` names each endpoint (its label, as the
  records' `endpoint` column) and its scrapes' file (`server_metrics-N.jsonl`, in place of
  `server_metrics.jsonl`); `RunData.endpoints` holds one sub-run per endpoint (its records, its
  scrapes, the run's stage windows), which swarm/analysis/endpoints.py diagnoses one by one.

`stage_rows()` is the only place that knows the summary's stage layout; `findings()` runs the
diagnosis over what was loaded.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from swarm.analysis.client_server import TtftComparison, compare_ttft
from swarm.analysis.diagnosis import diagnose
from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.gpu_diagnosis import gpu_findings
from swarm.analysis.gpu_metrics import (
    GpuSnapshot,
    GpuWindow,
    gpu_stage_stats,
    read_gpu_snapshots,
)
from swarm.analysis.server_metrics import (
    ServerSnapshot,
    StageServerStats,
    read_snapshots,
    stage_stats,
    unobservable_reason,
    window_stats,
)
from swarm.core.errors import UsageError
from swarm.core.runfiles import (
    CLIENT_CPU,
    ENDPOINTS_JSON,
    GPU_METRICS,
    RECORDS_DIR,
    REQUESTS,
    SERVER_METRICS,
    SIM_TRACE,
    SUMMARY,
    SUMMARY_PART,
)
from swarm.stats import summary as summary_file
from swarm.stats import summary_shape
from swarm.stats.cpu import ClientLoad
from swarm.stats.quantiles import latency_stats
from swarm.stats.summary import Block, StageEntry, StageTimelineEntry, Summary


@dataclass
class RunData:
    directory: Path
    summary: Summary  # {} when the run has no summary.json
    records: Any  # pandas.DataFrame or None
    snapshots: list[ServerSnapshot]
    cpu: ClientLoad  # empty when the run has no client_cpu.jsonl
    rows: list[StageRow] = field(default_factory=list)
    server: dict[int, StageServerStats] = field(default_factory=dict)
    run_server: StageServerStats | None = None
    users_estimated: bool = False
    notes: list[str] = field(default_factory=list)
    gpu_snapshots: list[GpuSnapshot] = field(default_factory=list)  # gpu_metrics.jsonl (--gpu-metrics)
    gpus: dict[int, list[GpuWindow]] = field(default_factory=dict)  # stage -> one window per GPU
    # stage -> client vs server TTFT on the same requests (the server's windows)
    ttft_pairs: dict[int, TtftComparison] = field(default_factory=dict)
    # several endpoints: label -> that endpoint's sub-run (its records and scrapes, the run's windows)
    endpoints: dict[str, RunData] = field(default_factory=dict)
    metrics_file: str = SERVER_METRICS  # the scrapes' file (an endpoint's sub-run: its own)

    @property
    def name(self) -> str:
        return str(self.summary.get("run_id") or self.directory.name)

    @property
    def source(self) -> str:
        return self.snapshots[0].source if self.snapshots else "none"


def _read_records(directory: Path) -> Any:
    import pandas as pd

    path = directory / REQUESTS
    if path.exists():
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as e:  # a cut or foreign file (pyarrow's ArrowInvalid is a ValueError)
            raise UsageError(f"{path} cannot be read as request records: {_first_line(e)}") from None
    if (directory / RECORDS_DIR).is_dir():
        from swarm.core import recordfile

        table = recordfile.read_table(directory / RECORDS_DIR)
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


TraceTimes = tuple[float, float | None, float | None, float | None]  # arrival, scheduled, first token, end


def read_trace_times(directory: Path, ids: set[str]) -> dict[str, TraceTimes]:
    """The simulator's own times (sim-trace.jsonl, swarm/sim/trace.py) of the requests named in `ids`:
    arrival, first scheduled (None in a trace written before it was traced), first token, end.
    Empty when the run has no trace."""
    import orjson

    path = directory / SIM_TRACE
    out: dict[str, TraceTimes] = {}
    if not ids or not path.exists():
        return out
    with path.open("rb") as f:
        for line in f:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn last line from a killed run
            rid = rec.get("id")
            if rid in ids and isinstance(rec.get("arrival_time"), float | int):
                out[rid] = (
                    float(rec["arrival_time"]),
                    rec.get("scheduled_time"),
                    rec.get("first_token_time"),
                    rec.get("end_time"),
                )
    return out


def block_from_records(df: Any, duration_s: float | None) -> Block:
    """A summary-style block computed exactly from records (when the summary lacks one)."""
    cut = ["cancelled", "cancelled_by_client"]  # (by the stop, by the client: neither ok nor failed)
    failures = df.loc[~df["outcome"].isin(["ok", *cut]), "outcome"].value_counts().to_dict()
    good = df[(df["outcome"] == "ok") & ~df["warmup"].fillna(False).astype(bool)]
    out: dict[str, Any] = {
        "requests": len(df),
        "completed": len(df),
        "cancelled": int((df["outcome"] == "cancelled").sum()),
        "cancelled_by_client": int((df["outcome"] == "cancelled_by_client").sum()),
        "failures": {k: int(v) for k, v in failures.items()},
        "prompt_tokens": int(df["prompt_tokens"].fillna(0).sum()),
        "output_tokens": int(df["output_tokens"].fillna(0).sum()),
        "reasoning_tokens": int(df["reasoning_tokens"].fillna(0).sum()),
    }
    out["qps"] = len(df) / duration_s if duration_s else 0.0
    out["output_tok_s"] = out["output_tokens"] / duration_s if duration_s else 0.0
    for name in ("ttft", "ttfa", "tpot", "e2e"):
        out[f"{name}_s"] = latency_stats(good[f"{name}_s"].dropna().tolist())
    itl = [float(x) for xs in good["itl_s"] if xs is not None and len(xs) for x in xs]
    out["itl_s"] = latency_stats(itl)
    return cast(Block, out)


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


def stage_rows(summary: Summary | Mapping[str, Any], records: Any = None) -> tuple[list[StageRow], bool]:
    """Summary stage entries (+ records where the summary lacks something) -> StageRows.

    Reads per entry: `stage`, `duration_s`, `total` (a block), and `users`, `start_s`/`end_s`
    (or `start_wall_s`/`end_wall_s`), `warmup_s` when present; a top-level `stage_timeline`
    ([{index, users, start_wall_s, end_wall_s, warmup_s}], swarm.live.shape) is used too. What is
    still missing comes from the records: window = first send to the next stage's first send
    (the last stage: its last finish), users = peak in flight (flagged as estimated).
    Returns (rows, users_estimated).
    """
    timeline: dict[int, StageTimelineEntry | Mapping[str, Any]] = {
        int(t.get("index", t.get("stage", 0))): t for t in summary.get("stage_timeline") or []
    }
    entries = _stage_entries(summary, records)
    rows, estimated = [], False
    derived_end: set[int] = set()
    for idx in sorted(entries):
        sub = records[records["stage"] == idx] if records is not None and len(records) else None
        row, users_estimated, end_derived = _stage_row(idx, entries[idx], timeline.get(idx, {}), sub)
        rows.append(row)
        estimated = estimated or users_estimated
        if end_derived:
            derived_end.add(idx)
    for row, nxt in itertools.pairwise(rows):  # a derived window ends where the next stage starts
        if (
            row.stage in derived_end
            and nxt.start_s is not None
            and row.end_s is not None
            and nxt.start_s < row.end_s
        ):
            row.end_s = nxt.start_s
    return rows, estimated


def _stage_entries(summary: Summary | Mapping[str, Any], records: Any) -> dict[int, dict[str, Any]]:
    """stage -> its summary entry (StageEntry, or an older file's entry: read with .get); an empty
    one for a stage only the records know; the whole run as stage 0 for a summary without stages."""
    entries: dict[int, dict[str, Any]] = {
        int(e.get("stage", e.get("index", 0))): dict(e) for e in summary.get("stages") or []
    }
    if records is not None and len(records):
        for s in sorted(set(int(x) for x in records["stage"].dropna().unique()) - set(entries)):
            entries[s] = {"stage": s}
    if not entries and summary.get("total"):
        whole: StageEntry = {
            "stage": 0,
            "duration_s": summary.get("duration_s"),
            "total": summary["total"],
            "start_s": summary.get("start_s"),
            "end_s": summary.get("end_s"),
            "users": summary.get("users"),
        }
        entries[0] = dict(whole)
    return entries


def _stage_row(
    idx: int, e: dict[str, Any], t: StageTimelineEntry | Mapping[str, Any], sub: Any
) -> tuple[StageRow, bool, bool]:
    """One stage's row from its entry, its timeline entry and its records (`sub`, or None), with
    whether its users were estimated and whether its end was taken from the records. A block the
    entry lacks is computed from the records and kept in the entry (`e["total"]`)."""
    has_records = sub is not None and len(sub)
    start = e.get("start_s", e.get("start_wall_s", t.get("start_wall_s")))
    end = e.get("end_s", e.get("end_wall_s", t.get("end_wall_s")))
    end_derived = False
    if (start is None or end is None) and has_records:
        start = float(sub["start_wall_s"].min()) if start is None else start
        if end is None:
            end = float((sub["start_wall_s"] + sub["e2e_s"].fillna(0)).max())
            end_derived = True
    users = e.get("users", t.get("users"))
    users_estimated = False
    if users is None and has_records:
        users, users_estimated = _peak_in_flight(sub), True
    duration = e.get("duration_s") or (end - start if start is not None and end is not None else None)
    block: Block | Mapping[str, Any] | None = e.get("total")
    if block is None and has_records:
        block = block_from_records(sub, duration)
        e["total"] = block
    block = block or {}
    lat = {k: block.get(f"{k}_s") or {} for k in ("ttft", "e2e", "tpot", "itl", "send_lag")}
    rate = e.get("rate", t.get("rate"))
    row = StageRow(
        stage=idx,
        users=None if users is None else int(users),
        start_s=start,
        end_s=end,
        warmup_s=float(e.get("warmup_s", t.get("warmup_s", 0.0)) or 0.0),
        duration_s=duration,
        requests=int(block.get("requests", 0)),
        failures=int(sum((block.get("failures") or {}).values())),
        cancelled=int(block.get("cancelled") or 0),
        cancelled_by_client=int(block.get("cancelled_by_client") or 0),
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
        rate=None if rate is None else float(rate),
        send_lag_p50=lat["send_lag"].get("p50"),
        send_lag_p99=lat["send_lag"].get("p99"),
        send_lag_max=lat["send_lag"].get("max"),
        entry=e,
    )
    return row, users_estimated, end_derived


def slo_text(summary: Summary | Mapping[str, Any]) -> str | None:
    """The run's --slo objectives, from the summary's verdicts."""
    parts = [
        v.get("objective") for v in summary.get("slo") or [] if isinstance(v, Mapping) and v.get("objective")
    ]
    return ",".join(parts) if parts else None


def _cpu_note(lines: list[dict[str, Any]], summary: Summary | Mapping[str, Any]) -> str:
    """What the report says when client_cpu.jsonl gives no CPU per stage."""
    what = (
        f"no CPU per stage in {CLIENT_CPU} (a run from before the master recorded the workers' "
        f"own CPU reports)"
        if lines
        else f"no client CPU record ({CLIENT_CPU})"
    )
    if "workers" in summary:
        return f"{what}: client saturation from the workers' own CPU reports in summary.json; no CPU column"
    return f"{what}: client saturation not checked"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _load_summary(path: Path) -> Summary:
    """summary.json, or {} without one; a cut or foreign file is bad input (one line, exit 2), with
    the way out: without it the report is computed from the request records."""
    if not path.exists():
        return cast(Summary, {})
    try:
        summary = summary_file.load(path)
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        why = _first_line(e)
    else:
        wrong = summary_shape.problem(
            summary
        )  # valid JSON of another shape: named here, not deep in a reader
        if wrong is None:
            return summary
        why = wrong
    raise UsageError(
        f"{path} is not a readable summary ({why}); move it away to report from the request records alone"
    )


def _endpoint_files(directory: Path, records: Any) -> dict[str, str | None]:
    """label -> its scrapes' file name, for a run with several endpoints (endpoints.json, else the
    records' `endpoint` column with more than one label: no scrapes then); {} for one endpoint."""
    path = directory / ENDPOINTS_JSON
    if path.exists():
        try:
            index = json.loads(path.read_text())["endpoints"]
            return {str(e["label"]): e.get("server_metrics") for e in index}
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(f"{path} is not a readable endpoint list ({_first_line(e)})") from None
    if records is not None and "endpoint" in records.columns:
        labels = sorted(str(x) for x in records["endpoint"].dropna().unique() if x)
        if len(labels) > 1:
            return dict.fromkeys(labels)
    return {}


def _add_server(data: RunData) -> None:
    """The per-stage (after warm-up) and whole-run server statistics and the client vs server TTFT
    pairs, from `data.snapshots` over `data.rows`' windows."""
    windows = [
        (r.stage, r.start_s + r.warmup_s, r.end_s)
        for r in data.rows
        if r.start_s is not None and r.end_s is not None
    ]
    if data.snapshots:
        data.server = stage_stats(data.snapshots, windows)
        snaps = sorted(data.snapshots, key=lambda s: s.ts)
        data.run_server = window_stats(snaps, -1, snaps[0].ts, snaps[-1].ts)
        data.ttft_pairs = compare_ttft(data.records, data.server, snaps)


def _endpoint_run(data: RunData, label: str, metrics_file: str | None) -> RunData:
    """One endpoint's sub-run: its records, its scrapes, the run's stage windows; its blocks
    computed exactly from its records and its users estimated as its peak of requests in flight."""
    df = data.records
    mine = df[df["endpoint"] == label] if df is not None and "endpoint" in df.columns else None
    windows = [
        {"stage": r.stage, "start_s": r.start_s, "end_s": r.end_s, "warmup_s": r.warmup_s,
         "duration_s": r.duration_s}
        for r in data.rows
    ]  # fmt: skip
    summary = cast(Summary, {"run_id": f"{data.name} {label}", "stages": windows})
    if data.summary.get("search"):  # its answer's stage, for the cause there (analysis/search.py)
        summary["search"] = data.summary["search"]
    snapshots = read_snapshots(data.directory / metrics_file) if metrics_file else []
    sub = RunData(
        data.directory, summary, mine if mine is not None and len(mine) else None, snapshots, ClientLoad()
    )
    if metrics_file:
        sub.metrics_file = metrics_file  # its poller's reason (the endpoint unobservable) beside it
    sub.rows, sub.users_estimated = stage_rows(summary, sub.records)
    _add_server(sub)
    if not snapshots:
        sub.notes.append(f"no server metrics for endpoint {label}")
    return sub


def load_run(directory: Path, summary: Summary | None = None) -> RunData:
    """The run in `directory`, with `summary` where the caller has read it already (`swarm run`: the
    master's, before summary.json is written), else DIR/summary.json: a run is read once."""
    directory = Path(directory)
    if summary is None:
        path = directory / SUMMARY
        if not path.exists() and (directory / SUMMARY_PART).exists():  # swarm run killed before it
            path = directory / SUMMARY_PART  # published the master's summary: read it as it is
        summary = _load_summary(path)
    cpu_lines = _read_jsonl(directory / CLIENT_CPU)
    records = _read_records(directory)
    endpoints = _endpoint_files(directory, records)
    snapshots = [] if endpoints else read_snapshots(directory / SERVER_METRICS)
    data = RunData(directory, summary, records, snapshots, ClientLoad.from_lines(cpu_lines))
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
    _add_server(data)
    if endpoints:
        data.notes.append(
            f"{len(endpoints)} endpoints: the server metrics are per endpoint (Endpoints, below); "
            "the whole run's own rows are the client's"
        )
    elif not data.snapshots:
        data.notes.append(
            "no server metrics (server_metrics.jsonl): the target exposed no /metrics or none "
            "were scraped; client-side numbers only"
        )
    if not data.cpu:
        data.notes.append(_cpu_note(cpu_lines, summary))
    data.gpu_snapshots = read_gpu_snapshots(directory / GPU_METRICS)
    if data.gpu_snapshots:
        windows = [
            (r.stage, r.start_s + r.warmup_s, r.end_s)
            for r in data.rows
            if r.start_s is not None and r.end_s is not None
        ]
        data.gpus = gpu_stage_stats(data.gpu_snapshots, windows)
    data.endpoints = {label: _endpoint_run(data, label, f) for label, f in endpoints.items()}
    return data


def findings(data: RunData, slo: str | None = None) -> list[Finding]:
    found = diagnose(
        data.rows,
        data.server,
        source=data.source,
        cpu=data.cpu,
        slo_text=slo or slo_text(data.summary),
        run_server=data.run_server,
        client_total=data.summary.get("total") or _records_total(data),
        client_last_end=_last_end(data),
        bound_reported=data.summary.get("client_bound", ()),
        by_load=bool(data.summary.get("search")),
        ttft_pairs=data.ttft_pairs,
        unobservable=unobservable_reason(data.directory / data.metrics_file),
    )
    return found + gpu_findings(data.rows, data.gpus, found)


def _last_end(data: RunData) -> float | None:
    df = data.records
    if df is None or not len(df):
        return None
    return float((df["start_wall_s"] + df["e2e_s"].fillna(0.0)).max())


def _records_total(data: RunData) -> Block | dict[str, Any]:
    if data.records is None or not len(data.records):
        return {}
    return block_from_records(data.records, None)
