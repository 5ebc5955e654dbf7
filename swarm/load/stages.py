"""Load stages: the plan (--sweep / --rate, --stage-time, --warmup), the stages as run, their windows.

Pure (no Locust): `swarm run` checks the plan with `StagePlan.parse` before it starts anything,
and the load shape (swarm/live/shape.py) runs the same plan; --stage-time and --warmup come in as
seconds, parsed once by the caller (swarm/live/settings.py, swarm/orchestrate/plan.py). The shape
appends a `Stage` to the timeline as each one starts; `stage_windows` is the one place that turns
that timeline (or a run without stages: stage 0 from start to stop) into each stage's (start, end)
window, which summary.json's per-stage rates divide by.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from swarm.core.errors import UsageError

__all__ = ["Stage", "StagePlan", "parse_rates", "parse_sweep", "stage_windows"]


def parse_sweep(text: str) -> list[int]:
    """`--sweep 10,30,64`: closed-loop user counts."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --sweep {text!r}: give user counts, e.g. 10,30,64,128") from None
    if not levels or any(n < 1 for n in levels):
        raise UsageError(f"bad --sweep {text!r}: every level must be a whole number >= 1, e.g. 10,30,64")
    return levels


def parse_rates(text: str) -> list[float]:
    """`--rate 5,10,20`: open-loop requests per second."""
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --rate {text!r}: give requests per second, e.g. 5,10,20") from None
    if not rates or any(not 0 < r < math.inf for r in rates):  # nan and inf too: no schedule has them
        raise UsageError(
            f"bad --rate {text!r}: every rate must be a finite number > 0 requests/s, e.g. 5,10,20"
        )
    return rates


@dataclass(frozen=True)
class StagePlan:
    """The stages asked for: closed-loop user levels or open-loop rates (at most one), each
    `stage_s` long with its first `warmup_s` left out of its statistics. Neither: a plain run."""

    levels: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    stage_s: float = 0.0
    warmup_s: float = 0.0

    @classmethod
    def parse(cls, sweep: str | None, rate: str | None, stage_s: float, warmup_s: float) -> StagePlan:
        """From --sweep's and --rate's text and --stage-time and --warmup in seconds. Raises
        UsageError on bad or contradictory values."""
        if sweep and rate:
            raise UsageError("--sweep (closed loop) and --rate (open loop) exclude each other: give one")
        if not sweep and not rate:
            return cls()
        if stage_s <= 0:
            raise UsageError("--stage-time must be > 0, e.g. 30s")
        if warmup_s >= stage_s:
            raise UsageError(f"--warmup ({warmup_s:g}s) must be shorter than --stage-time ({stage_s:g}s)")
        if rate:
            return cls((), tuple(parse_rates(rate)), stage_s, warmup_s)
        return cls(tuple(parse_sweep(sweep or "")), (), stage_s, warmup_s)


@dataclass
class Stage:
    """One stage as it ran (summary.json `stage_timeline`)."""

    index: int
    users: int
    start_wall_s: float
    end_wall_s: float | None = None
    warmup_s: float = 0.0
    rate: float | None = None  # open loop: offered requests/s in total
    ended_by: str | None = None  # why it ended before its time (the search, the saturation guard)
    settled: bool | None = None  # its window opened once steady (False: at the bound; None: not judged)


@dataclass(frozen=True)
class Window:
    start_s: float
    end_s: float


def stage_windows(
    timeline: Sequence[Stage], run_start_s: float | None, run_end_s: float | None
) -> dict[int, Window]:
    """Each stage's (start, end): the timeline's own boundaries (a stage still running ends at
    `run_end_s`); without a timeline, stage 0 is the run from start to stop. Empty when unknown."""
    out: dict[int, Window] = {}
    for s in timeline:
        end = s.end_wall_s if s.end_wall_s is not None else run_end_s
        if end is not None:
            out[s.index] = Window(s.start_wall_s, end)
    if not timeline and run_start_s is not None and run_end_s is not None:
        out[0] = Window(run_start_s, run_end_s)
    return out


@dataclass
class StageState:
    """The current stage of one process (the shape sets it; each request copies it at send)."""

    index: int = 0
    warmup: bool = False
    timeline: list[Stage] = field(default_factory=list)  # master/local: the stages run so far
    rate_workers: int = 0  # master, open loop: the worker count the current stage's rate is split over

    def windows(self, run_start_s: float | None, run_end_s: float | None) -> Mapping[int, Window]:
        return stage_windows(self.timeline, run_start_s, run_end_s)
