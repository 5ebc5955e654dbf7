"""The run's settings inside one Locust process: every option of the table (swarm/core/options.py)
parsed once into a typed value, the table's default where none was given.

What each request carries is `LLMOptions` (swarm/live/options.py, `RunSettings.llm`); the rest is
the run's own: its stages, the search, the SLO, goodput and abort conditions, the trace replay and
where the files go. Locust hands its parsed options whole to every worker with each spawn; each
process builds its `RunSettings` from them once at start-up and again at each test start (the
web UI's form may change them: swarm/live/state.py `settings`), and the live layer reads these
fields: no module parses an option again. A bad value raises UsageError while they are built,
before any user starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.runfiles import SUMMARY, SUMMARY_PART
from swarm.core.units import parse_duration, parse_timespan
from swarm.live.options import LLMOptions, Parsed
from swarm.load.cache_bust import check_bust
from swarm.load.cancel import CancelSpec, parse_cancel
from swarm.load.stages import StagePlan
from swarm.stats import abort, slo
from swarm.stats.goodput import GoodputSpec, parse_goodput
from swarm.stats.search_spec import FIRST_RATE, FIRST_USERS, SearchSpec


@dataclass(frozen=True)
class TraceSettings:
    """--trace-replay and its options (swarm/load/trace.py reads the file with them)."""

    path: str
    format: str
    time_scale: float
    start_s: float
    duration_s: float | None  # None: to the trace's end
    block_size: int  # tokens per hash id
    max_lag_s: float  # a request later than this behind its schedule marks its worker as behind


@dataclass(frozen=True)
class RunSettings:
    """One process's options, parsed (see the module's docstring)."""

    llm: LLMOptions
    out_dir: Path | None  # --swarm-out
    summary_part: bool  # --summary-part: swarm run completes the master's summary into summary.json
    run_id: str | None  # --run-id (None: the master makes one)
    model_text: str | None  # --model as given (summary.json's model until a worker names the served one)
    headless: bool
    prometheus_port: int | None
    prometheus_host: str  # --prometheus-host ("": every interface)
    users: int | None  # Locust's -u (open loop: the in-flight cap)
    spawn_rate: float | None  # Locust's -r
    run_time_s: int | None  # Locust's -t (Locust parsed it into seconds)
    plan: StagePlan  # --sweep or --rate, --stage-time, --warmup
    stage_s: float  # --stage-time (a search's longest stage)
    warmup_s: float
    arrivals: str  # open loop's arrival process
    min_stage_s: float  # --min-stage-time
    saturation_guard_s: float  # 0: off
    slo_text: str | None
    objectives: tuple[slo.Objective, ...] | None  # --slo judged at the end (None with --search: per stage)
    search: SearchSpec | None
    goodput: GoodputSpec | None
    abort_on: tuple[abort.Condition, ...]  # () : no circuit breaker
    trace: TraceSettings | None
    seed: int | None  # --seed (None: a random one per run, swarm/live/prepare.py)
    cancel: CancelSpec | None = None  # --cancel: clients that hang up (None: none do)
    bust_prefix: bool = False  # --prefix-cache bust: every request's prefix unique
    reset_prefix_cache: bool = False  # --reset-prefix-cache: before each stage, where the server offers it

    @property
    def summary_path(self) -> Path | None:
        """Where the master writes its summary: DIR/summary.json, or under `swarm run` the part that
        swarm run completes (the search's why, from the server's metrics it scraped) into
        summary.json, so that file is written once, complete. None: no --swarm-out."""
        if self.out_dir is None:
            return None
        return self.out_dir / (SUMMARY_PART if self.summary_part else SUMMARY)

    @property
    def open_loop(self) -> bool:
        """--rate stages: the users pace themselves on the master's arrival schedule."""
        return bool(self.plan.rates)

    @classmethod
    def from_parsed(cls, opts: Any) -> RunSettings:
        """From Locust's parsed options (None: every default, as a bare Environment has)."""
        read = Parsed(opts)
        stage_s = float(parse_timespan(read.get("stage_time"), "--stage-time"))  # a search's too
        warmup_s = float(parse_timespan(read.get("warmup"), "--warmup"))
        plan = StagePlan.parse(read.get("sweep"), read.get("rate"), stage_s, warmup_s)
        users = read.number("num_users", int, "-u")
        mode = read.get("search")
        slo_text = read.get("slo")
        search = None
        if mode:
            start = (
                (plan.rates[0] if plan.rates else FIRST_RATE)
                if mode == "rate"
                else float(users or FIRST_USERS)
            )
            search = SearchSpec.parse(
                mode,
                slo_text,
                read.get("goodput_min"),
                read.get("search_precision"),
                read.get("search_budget"),
                start,
                read.get("goodput"),
            )
        goodput = read.get("goodput")
        abort_on = read.get("abort_on")
        port = read.number("prometheus_port", int, "--prometheus-port")
        out = read.get("swarm_out")
        llm = LLMOptions.from_parsed(opts)
        bust = check_bust(read.get("prefix_cache"), llm.dialect, trace=bool(read.get("trace_replay")))
        return cls(
            llm=llm,
            out_dir=Path(out) if out else None,
            summary_part=read.flag("summary_part"),
            run_id=read.get("run_id"),
            model_text=read.get("model"),
            headless=read.flag("headless"),
            prometheus_port=port or None,
            prometheus_host=str(read.get("prometheus_host") or ""),
            users=users,
            spawn_rate=read.number("spawn_rate", float, "-r"),
            run_time_s=read.get("run_time"),
            plan=plan,
            stage_s=stage_s,
            warmup_s=warmup_s,
            arrivals=str(read.get("arrivals")),
            min_stage_s=float(parse_timespan(read.get("min_stage_time"), "--min-stage-time")),
            saturation_guard_s=float(parse_timespan(read.get("saturation_guard"), "--saturation-guard")),
            slo_text=slo_text,
            # with --search the objectives are its criterion, judged per stage (swarm/live/search.py)
            objectives=tuple(slo.parse(slo_text)) if slo_text and not mode else None,
            search=search,
            goodput=parse_goodput(str(goodput)) if goodput else None,
            abort_on=tuple(abort.parse(abort_on)) if abort_on else (),
            trace=_trace(read),
            seed=read.number("seed", int, "--seed"),
            cancel=parse_cancel(read.get("cancel")),
            bust_prefix=bust,
            reset_prefix_cache=read.flag("reset_prefix_cache"),
        )


def _trace(read: Parsed) -> TraceSettings | None:
    path = read.get("trace_replay")
    if not path:
        return None
    if read.get("sweep") or read.get("rate"):
        raise UsageError("--trace-replay sets its own schedule: drop --sweep / --rate")
    duration = read.get("trace_duration")
    return TraceSettings(
        path=str(path),
        format=str(read.get("trace_format")),
        time_scale=read.number("time_scale", float, "--time-scale"),
        start_s=parse_duration(read.get("trace_start"), "--trace-start"),
        duration_s=parse_duration(duration, "--trace-duration") if duration else None,
        block_size=read.number("trace_block_size", int, "--trace-block-size"),  # >= 1: load_trace checks
        max_lag_s=parse_duration(read.get("trace_max_lag"), "--trace-max-lag"),
    )
