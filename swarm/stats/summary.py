"""summary.json from the master's merged aggregate (pure: an Aggregate and run facts in, a dict out).

Its schema, field by field, is in docs/metrics.md ("summary.json, field by field"): what each
top-level key, block, stage entry and interval holds, and over which requests and window.

The shapes are typed below (`Summary`, `Block`, `StageEntry`, ...): the master writes them and
every reader (report, table, SLOs, compare, diagnosis) reads through them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from swarm.core.units import stage_name
from swarm.stats import confidence, goodput, quantiles
from swarm.stats.aggregate import BIN_S, DRAIN, LATENCIES, Aggregate, Cell
from swarm.stats.reachability import endpoints_unreachable_since, target_unreachable_since

BLOCK_KEYS: tuple[str, ...] = (
    "requests",
    "completed",
    "cancelled",
    "cancelled_by_client",
    "failures",
    "prompt_tokens",
    "output_tokens",
    "reasoning_tokens",
    "prompt_cache",
    "qps",
    "output_tok_s",
    *(f"{name}_s" for name in LATENCIES),
)
NOTES = (
    "requests counts every request sent, each once (failed, cancelled, cancelled_by_client and warm-up "
    "included); qps and "
    "output_tok_s count the requests completed inside the window over its duration_s (the drain after "
    "the stop is reported apart); latency percentiles are nearest-rank-lower over successful, "
    "non-warm-up requests, from DDSketch (0.5% relative accuracy); mean and max are exact"
)


class LatencyBlock(TypedDict):
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None


class ToolsBlock(TypedDict):
    """Agent steps' tool calls (swarm/load/agent.py): every step that offered tools, each once."""

    steps: int  # agent steps sent (any outcome)
    tasks: int  # tasks ended with their last step answered (a failed or cut step ends its task unmeasured)
    calls: int
    valid: int
    invalid: int
    none_when_required: int  # steps answered without a call under --tool-choice required / NAME
    reasons: dict[str, int]  # invalid calls' reason (and none_when_required) -> steps
    task_goodput: NotRequired[TaskGoodputBlock]  # with a task SLO (--slo task_pNN<=T)


class TaskGoodputBlock(TypedDict):
    """Tasks that ended well within a task SLO's bound: successful last steps whose task took at most
    `bound_s`, read from the `task` sketch (a task within 0.5% of the bound counts as within)."""

    bound_s: float
    met: int
    tasks: int  # tasks whose last step succeeded
    share: float | None


class GoodputBlock(TypedDict):
    """A block's goodput (--goodput): see the module's docstring."""

    slo: str
    met: int
    rate: float
    share: float | None


class PromptCacheBlock(TypedDict):
    """A block's cached prompt tokens, over the requests whose server reported them."""

    requests: int
    cached_tokens: int
    prompt_tokens: int
    hit_share: float | None


CI_KEYS: tuple[str, ...] = ("qps", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99")


class CiBlock(TypedDict):
    """95% intervals of a block's QPS and latency percentiles ([low, high] or None)."""

    level: float
    qps: list[float] | None
    ttft_p50: list[float] | None
    ttft_p99: list[float] | None
    tpot_p50: list[float] | None
    tpot_p99: list[float] | None
    e2e_p50: list[float] | None
    e2e_p99: list[float] | None
    reasons: dict[str, str]  # CI key -> why it is null (only the null ones)


class Block(TypedDict):
    """One workload's (or the total's) numbers: exactly BLOCK_KEYS (and `goodput`, `ci` when known)."""

    requests: int
    completed: int
    cancelled: int
    cancelled_by_client: int  # the client hung up on purpose (--cancel); not in latencies nor failures
    failures: dict[str, int]
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int
    prompt_cache: PromptCacheBlock | None
    qps: float
    output_tok_s: float
    ttft_s: LatencyBlock
    ttfa_s: LatencyBlock
    itl_s: LatencyBlock
    tpot_s: LatencyBlock
    e2e_s: LatencyBlock
    send_lag_s: LatencyBlock
    ttftc_s: LatencyBlock  # agent steps: time to the first tool-call token
    task_s: LatencyBlock  # agent tasks: duration (the steps' E2E + tool times), from their last step
    tools: NotRequired[ToolsBlock]  # agent steps only
    goodput: NotRequired[GoodputBlock]
    ci: NotRequired[CiBlock]


class StageEntry(TypedDict):
    """One load stage: its window's numbers (`total`, and a Block per workload name that sent in it)."""

    stage: int  # 0-based index
    name: NotRequired[str]  # "stage 1" for index 0, as every label shows it (older files lack it)
    duration_s: float | None
    total: Block
    users: NotRequired[int]  # from the stage timeline (the shape), when there is one
    start_s: NotRequired[float]
    end_s: NotRequired[float | None]
    warmup_s: NotRequired[float]
    rate: NotRequired[float | None]
    sent_rate: NotRequired[float]  # open loop: the requests per second it sent (requests / duration_s)
    ended_by: NotRequired[str]  # why the stage ended before its time (the search, the saturation guard)
    settled: NotRequired[bool]  # the search's stages: measured once steady (False: at the settling bound)


class StageTimelineEntry(TypedDict):
    """A stage as the load shape ran it (swarm/load/stages.py `Stage`)."""

    index: int
    users: int
    start_wall_s: float
    end_wall_s: float | None
    warmup_s: float
    rate: float | None
    ended_by: NotRequired[str | None]  # why it ended before its time (the search, the saturation guard)
    settled: NotRequired[bool | None]  # its window opened once steady (False: at the bound; None: not judged)


class DegradedWorker(TypedDict):
    worker: str
    detected_at: str | None
    last_report_at: str | None
    reason: str
    reconnected_at: NotRequired[str]


class ClientBound(TypedDict):
    stage: int
    worker: str
    cpu_percent: float  # demand: CPU + waiting for a CPU, % of one core (swarm/stats/cpu.py)


class VerdictEntry(TypedDict):
    text: str
    ok: bool
    objective: str
    workload: str
    metric: str
    value: float | None


class Drain(TypedDict):
    """After the stop began: requests that finished then, and those the stop cut."""

    requests: int
    output_tokens: int
    cancelled: int
    duration_s: float | None


class ErrorEntry(TypedDict):
    message: str
    count: int


class SearchProbe(TypedDict):
    """summary.json `search.probes[i]` (swarm/stats/search_bracket.py `Probe`)."""

    stage: int
    load: float
    ok: bool | None
    qps: float | None
    ttft_p99: float | None
    ratio: float | None
    duration_s: float
    ended_by: str
    values: dict[str, float | None]
    bracket: list[float | None]
    settle_s: NotRequired[float | None]
    settled: NotRequired[bool | None]


class SearchResult(TypedDict, total=False):
    """summary.json `search` (swarm/stats/search_bracket.py `Bracket.answer`, with the stage figures
    swarm/stats/summary_sections.py adds)."""

    mode: str
    criterion: str
    precision: float | None
    budget_s: float | None
    status: str
    converged: bool
    unit: str
    answer: float | None
    bracket: list[float | None]
    qps: float | None
    ttft_p99_s: float | None
    answer_stage: int | None
    plateau_qps: float | None
    probes: list[SearchProbe]
    headline: str  # the one line (swarm/live/search.py)
    why: str  # what held the server at the answer, and its finding's kind (orchestrate/collect.py)
    why_kind: str


class Summary(TypedDict):
    """summary.json. Besides these keys, one `Block` per workload name (`workload_block`)."""

    run_id: str
    model_name: str | None
    start_time: str | None
    end_time: str | None
    start_s: float | None
    end_s: float | None
    duration_s: float | None
    users: int
    workers: int
    degraded: bool
    degraded_workers: list[DegradedWorker]
    workloads: list[str]
    notes: str | list[str]  # a --virtual run's (orchestrate/virtual_run.py) is a list of lines
    errors: dict[str, list[ErrorEntry]]
    target_unreachable_since: str | None
    target_unreachable_since_s: float | None
    total: Block
    drain: Drain
    stages: list[StageEntry]
    stage_timeline: NotRequired[list[StageTimelineEntry]]
    client_bound: NotRequired[list[ClientBound]]
    slo: NotRequired[list[VerdictEntry]]
    intended_prefix_share: NotRequired[dict[str, float]]  # workload -> share of prompt tokens shared
    prefix_cache_mode: NotRequired[str]  # "bust" with --prefix-cache bust (each prefix unique: shares 0)
    trace_replay: NotRequired[dict[str, Any]]  # --trace-replay: rows sent, lost workers (live/replay.py)
    classes: NotRequired[dict[str, dict[str, Block]]]  # workload -> request class -> its Block
    models: NotRequired[dict[str, Block]]  # served model the requests named -> its Block (all workloads)
    endpoints: NotRequired[dict[str, Block]]  # endpoint label -> its Block, with several endpoints only
    endpoints_unreachable_since: NotRequired[dict[str, str | None]]  # endpoint label -> ISO, likewise
    sessions: NotRequired[dict[str, Any]]  # chat_session: swarm/stats/turns.py `TurnStats.summary`
    # --search: probes, bracket, answer (swarm/stats/search_bracket.py `Bracket.answer`)
    search: NotRequired[SearchResult]
    aborted: NotRequired[dict[str, Any]]  # --abort-on tripped: reason, condition, value (stats/abort.py)
    provenance: NotRequired[dict[str, Any]]  # what the run was: swarm/stats/provenance.py `Provenance`


def workload_block(summary: Mapping[str, Any], name: str) -> Block | None:
    """The Block of workload `name` (or "total") in a summary or a stage entry; None if absent."""
    block = summary.get(name)
    return cast(Block, block) if isinstance(block, Mapping) else None


def load(path: Path) -> Summary:
    """Read a summary.json."""
    return cast(Summary, json.loads(Path(path).read_text()))


def intervals(
    cell: Cell, per_bin: Mapping[int, int], window: tuple[float | None, float | None], qps: float
) -> CiBlock:
    """The `ci` entry: QPS from the completions per bin in `window`, percentiles from `cell`'s sketches."""
    lat = cell.latencies
    found = {"qps": confidence.qps_interval(per_bin, BIN_S, window[0], window[1], qps, lat["e2e"].mean)}
    for key in CI_KEYS[1:]:
        name, stat = key.split("_")
        found[key] = confidence.quantile_interval(lat[name], quantiles.PERCENTILES[stat])
    out: dict[str, Any] = {"level": confidence.LEVEL}
    for key, ci in found.items():
        out[key] = None if isinstance(ci, confidence.NoInterval) else list(ci)
    out["reasons"] = {k: ci.reason for k, ci in found.items() if isinstance(ci, confidence.NoInterval)}
    return cast(CiBlock, out)


def block(
    cell: Cell,
    duration_s: float | None,
    completed: tuple[int, int] | None = None,
    *,
    goodput_slo: str | None = None,
    good: int | None = None,
    window: tuple[float | None, float | None] | None = None,
    per_bin: Mapping[int, int] | None = None,
) -> Block:
    """One workload's (or the total's) numbers: exactly BLOCK_KEYS. `completed`: (requests, output
    tokens) that finished inside the window (None: every completion outside the drain).
    `goodput_slo`: the --goodput text (adds `goodput`; `good`: good requests completed inside the
    window, None: all outside the drain). `window`: (start, end) of the window (adds `ci`; `per_bin`:
    the completions per bin to read, None: the cell's)."""
    done, done_tokens = cell.completed_in() if completed is None else completed
    out: dict[str, Any] = {
        "requests": cell.requests,
        "completed": done,
        "cancelled": cell.cancelled,
        "cancelled_by_client": cell.cancelled_by_client,
        "failures": cell.failures,
        "prompt_tokens": cell.prompt_tokens,
        "output_tokens": cell.output_tokens,
        "reasoning_tokens": cell.reasoning_tokens,
        "prompt_cache": prompt_cache(cell),
        "qps": quantiles.rate(done, duration_s),
        "output_tok_s": quantiles.rate(done_tokens, duration_s),
    }
    for name in LATENCIES:
        out[f"{name}_s"] = quantiles.sketch_stats(cell.latencies[name])
    if cell.tools[0]:
        out["tools"] = tools_block(cell)
    if goodput_slo:
        rate_met = cell.good_in() if good is None else good
        out["goodput"] = goodput.block(
            goodput_slo, cell.goodput_met, cell.goodput_counted, duration_s, rate_met
        )
    if window is not None:
        out["ci"] = intervals(cell, cell.per_bin if per_bin is None else per_bin, window, out["qps"])
    return cast(Block, out)


def tools_block(cell: Cell) -> ToolsBlock:
    """The block's `tools` (agent steps)."""
    steps, calls, valid, none_required, tasks = cell.tools
    return {
        "steps": steps,
        "tasks": tasks,
        "calls": calls,
        "valid": valid,
        "invalid": calls - valid,
        "none_when_required": none_required,
        "reasons": dict(sorted(cell.tool_errors.items())),
    }


def prompt_cache(cell: Cell) -> PromptCacheBlock | None:
    """The block's `prompt_cache` (None when no request reported its cached tokens)."""
    requests, cached, prompt = cell.cached
    if not requests:
        return None
    return {
        "requests": requests,
        "cached_tokens": cached,
        "prompt_tokens": prompt,
        "hit_share": cached / prompt if prompt else None,
    }


def errors(cell: Cell) -> dict[str, list[dict[str, Any]]]:
    """Failed outcome -> its kept messages with counts, most frequent first."""
    return {
        outcome: [{"message": m, "count": n} for m, n in sorted(msgs.items(), key=lambda kv: -kv[1])]
        for outcome, msgs in sorted(cell.errors.items())
        if msgs
    }


def drain_s(total: Cell, load_end: float | None) -> float | None:
    """From the stop to the last request's end (the master's own stop can come first)."""
    if load_end is None or total.last_end_s is None:
        return None
    return max(0.0, total.last_end_s - load_end)


def iso_time(t: float | None) -> str | None:
    """`t` (time.time()) as ISO 8601 UTC with milliseconds; None stays None."""
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def build(
    agg: Aggregate,
    *,
    run_id: str,
    model_name: str | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
    stopped_s: float | None = None,
    users: int = 0,
    workers: int = 0,
    degraded_workers: Sequence[Mapping[str, Any]] = (),
    stage_windows: Mapping[int, tuple[float, float]] | None = None,
    goodput_slo: str | None = None,
    task_slo_s: float | None = None,
) -> Summary:
    """The summary.json dict. `start_s`/`end_s`: the run's start and end on the master; `stopped_s`:
    when its stop began (the end of the load window; None: `end_s`). `stage_windows`: stage ->
    (start_s, end_s) where the master saw them. `goodput_slo`: the --goodput text (None: none).
    `task_slo_s`: a task SLO's bound (--slo task_pNN<=T): agent blocks add their task goodput."""
    total = agg.combined(bins=True)
    load_end = stopped_s if stopped_s is not None else end_s
    duration = load_end - start_s if start_s is not None and load_end is not None else total.window_s()
    window = (start_s, load_end)
    workloads = agg.workloads()
    out: dict[str, Any] = {
        "run_id": run_id,
        "model_name": model_name,
        "start_time": iso_time(start_s),
        "end_time": iso_time(end_s),
        "start_s": start_s,
        "end_s": end_s,
        "duration_s": duration,
        "users": users,
        "workers": workers,
        "degraded": bool(degraded_workers),
        "degraded_workers": [dict(d) for d in degraded_workers],
        "workloads": workloads,
        "notes": NOTES,
        **_run_outcome(total, duration, window, goodput_slo, target_unreachable_since(agg)),
    }
    by_workload = {name: agg.combined(workload=name, bins=True) for name in workloads}
    for name, cell in by_workload.items():
        out[name] = block(cell, duration, goodput_slo=goodput_slo, window=window)
    out["classes"] = {
        name: {
            k: block(agg.combined(workload=name, klass=k), duration, goodput_slo=goodput_slo)
            for k in agg.classes(name)
        }
        for name in workloads
    }
    out["models"] = {m: block(agg.combined(model=m), duration, goodput_slo=goodput_slo) for m in agg.models()}
    if len(eps := agg.endpoints()) > 1:
        out["endpoints"] = {
            e: block(agg.combined(endpoint=e), duration, goodput_slo=goodput_slo) for e in eps
        }
        lost = endpoints_unreachable_since(agg)
        out["endpoints_unreachable_since"] = {e: iso_time(lost[e]) for e in eps}
    out["stages"] = [
        _stage_entry(agg, stage, total, by_workload, (stage_windows or {}).get(stage), goodput_slo)
        for stage in agg.stages()
    ]
    if agg.turns:  # conversations: per turn, and the requests in flight next to the user count
        out["sessions"] = agg.turns.summary(in_flight_mean(total, duration))
    if task_slo_s is not None:
        for key, cell in (("total", total), *by_workload.items()):
            tools = out[key].get("tools")
            if tools is not None:
                tools["task_goodput"] = task_goodput(cell, task_slo_s)
    return cast(Summary, out)


def task_goodput(cell: Cell, bound_s: float) -> TaskGoodputBlock:
    """The share of `cell`'s finished tasks that took at most `bound_s`."""
    task = cell.latencies["task"]
    met = task.count - task.count_above(bound_s)
    return {
        "bound_s": bound_s,
        "met": met,
        "tasks": task.count,
        "share": met / task.count if task.count else None,
    }


def _run_outcome(
    total: Cell,
    duration: float | None,
    window: tuple[float | None, float | None],
    goodput_slo: str | None,
    lost: float | None,
) -> dict[str, Any]:
    """The whole run's errors, the target's loss, its `total` block and the `drain` after the stop."""
    drained, drained_tokens = total.completed_in([DRAIN])
    return {
        "errors": errors(total),
        "target_unreachable_since": iso_time(lost),
        "target_unreachable_since_s": lost,
        "total": block(total, duration, goodput_slo=goodput_slo, window=window),
        "drain": {
            "requests": drained,
            "output_tokens": drained_tokens,
            "cancelled": total.cancelled,
            "duration_s": drain_s(total, window[1]) if drained or total.cancelled else 0.0,
        },
    }


def _stage_entry(
    agg: Aggregate,
    stage: int,
    total: Cell,
    by_workload: Mapping[str, Cell],
    window: tuple[float, float] | None,
    goodput_slo: str | None,
) -> dict[str, Any]:
    """One `stages` entry: the stage's window (where the master saw it, else its first send to its
    last end), its `total` block and a block per workload that sent in it."""
    cell = agg.combined(stage=stage)
    duration = window[1] - window[0] if window else cell.window_s()
    span = window or (cell.first_start_s, cell.last_end_s)
    entry: dict[str, Any] = {"stage": stage, "name": stage_name(stage), "duration_s": duration}
    for name, whole in (("total", total), *by_workload.items()):
        part = cell if name == "total" else agg.combined(workload=name, stage=stage)
        if name == "total" or part.requests:
            entry[name] = block(
                part,
                duration,
                whole.completed_in([stage]),
                goodput_slo=goodput_slo,
                good=whole.good_in([stage]),
                window=span,
                per_bin=whole.per_bin,
            )
    return entry


def in_flight_mean(total: Cell, duration_s: float | None) -> float | None:
    """Average requests in flight over the run (Little's law: the ok requests' E2E seconds over the
    load window's length); with think time it is below the user count."""
    if not duration_s or duration_s <= 0:
        return None
    return total.latencies["e2e"].sum / duration_s


def write(summary: Mapping[str, Any], path: Path) -> None:
    """Write atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)
