"""A stage's verdict on the search's criterion, and whether the stage may end.

`measure` reads one objective on a live stage (a latency percentile with its interval, or the
share of answers above its threshold; a rate or a share exactly); `judge_stage` gives a verdict
only when every latency objective's interval lies on one side of its threshold (decided); at its
longest a stage whose interval still straddles the threshold is inconclusive (ok None), and an
inconclusive probe never narrows the bracket. (The knee's stability test ends a stage whose
interval is narrower than the precision.) Pure: the master's search shape (swarm/live/search.py)
feeds it numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.stats import slo
from swarm.stats.quantiles import Sketch
from swarm.stats.stage_intervals import Z_STAGE, quantile_ci

MIN_OK = 50  # successful requests a stage needs before its percentiles are judged
# A percentile whose whole interval (order statistics, Z_STAGE) lies below 3/4 of the threshold,
# or above 4/3 of it, after MIN_BATCHES sub-windows, is decided by its magnitude: a tail share
# with no answer above T says little in a few hundred answers that come in waves (64 users at
# 43 req/s needed 30 s), but a p99 of 100 ms is no near miss of 800 ms.
FAR = 0.75


@dataclass
class Measure:
    """One objective's reading in a stage: the value, its interval (latencies), the verdict."""

    objective: str
    value: float | None
    low: float | None
    high: float | None
    threshold: float
    ok: bool | None  # None: no data
    decided: bool  # the interval lies on one side of the threshold
    upper: bool = True  # a "<=" / "<" objective (else ">=" / ">")
    exact: bool = False  # read without an interval (a rate or share: error_rate, qps, goodput)

    @property
    def ratio(self) -> float | None:
        """value / threshold for "<=" objectives (threshold / value for ">="): above 1 fails."""
        if self.value is None or self.threshold <= 0:
            return None
        if self.value <= 0:
            return 1e-6 if self.upper else 1e6
        return self.value / self.threshold if self.upper else self.threshold / self.value


def percentile_of(objective: slo.Objective) -> tuple[str, float] | None:
    """(latency name, q) of a latency-percentile objective ("ttft_p99<=800ms" -> ("ttft", 0.99))."""
    name, _, stat = objective.metric.rpartition("_")
    if name and stat.startswith("p") and stat[1:].isdigit():
        return name, int(stat[1:]) / 100
    return None


def measure(
    objective: slo.Objective,
    block: Mapping[str, Any],
    sketches: Mapping[str, Sketch],
    z: float = Z_STAGE,
    tail: tuple[float, float] | None = None,
    tail_judged: bool = False,
) -> Measure:
    """`objective` on a live stage: `block` carries the rates (summary block keys), `sketches` the
    workload's latency sketches by name (ttft, e2e, ...) for percentile intervals. `tail`: for a
    "pNN <= T" objective, the share of answers above T and its half-width (`TailShare`); then
    the verdict is the tail's (decided when the share's interval lies on one side of 1 - q, or
    the percentile's interval lies FAR from T); `tail_judged` with no `tail` yet: undecided."""
    upper = objective.op in ("<=", "<")
    value = objective.measured({objective.workload: block})
    low = high = value
    name, _, stat = objective.metric.rpartition("_")
    if name in sketches and stat.startswith("p") and stat[1:].isdigit():
        q = int(stat[1:]) / 100
        ci = quantile_ci(sketches[name], q, z)
        if ci is not None:
            low, high = min(ci[0], value or ci[0]), max(ci[1], value or ci[1])
    if value is None:
        return Measure(objective.text, None, None, None, objective.threshold, None, False, upper)
    ok = slo.Verdict(objective, value).ok
    t = objective.threshold
    pq = percentile_of(objective)
    if tail_judged and upper and pq is not None:
        if tail is None:  # too few sub-windows yet: no verdict either way
            return Measure(objective.text, value, low, high, t, ok, False, upper)
        if high is not None and high <= FAR * t:  # far below: a verdict from the magnitude alone
            return Measure(objective.text, value, low, high, t, True, True, upper)
        if low is not None and low >= t / FAR:
            return Measure(objective.text, value, low, high, t, False, True, upper)
        share, half = tail
        allowed = 1 - pq[1]
        ok = share <= allowed
        decided = share + half <= allowed or share - half > allowed
        return Measure(objective.text, value, low, high, t, ok, decided, upper)
    decided = bool(high is not None and high <= t) if upper else bool(low is not None and low >= t)
    if not decided:  # surely failing?
        decided = bool(low is not None and low > t) if upper else bool(high is not None and high < t)
    return Measure(objective.text, value, low, high, t, ok, decided, upper, exact=pq is None)


def stability(sketch: Sketch, q: float, name: str) -> Measure:
    """A quantile with its interval and no threshold: the knee's test of a stable stage."""
    ci = quantile_ci(sketch, q, Z_STAGE)
    value = sketch.quantile(q)
    return Measure(name, value, ci[0] if ci else None, ci[1] if ci else None, 1.0, value is not None, False)


def goodput_measure(block: Mapping[str, Any], share_min: float) -> Measure:
    """`--goodput-min` on a stage block's `goodput.share` (the summary key of --goodput); no data
    (never decided) without it."""
    share = (block.get("goodput") or {}).get("share")
    text = f"goodput>={share_min * 100:g}%"
    if share is None:
        return Measure(text, None, None, None, share_min, None, False, upper=False)
    v = float(share)
    return Measure(text, v, v, v, share_min, v >= share_min, False, upper=False, exact=True)


def stable(m: Measure, precision: float) -> bool:
    """The interval's half-width is within `precision` of the value."""
    if m.value is None or m.low is None or m.high is None or m.value <= 0:
        return False
    return (m.high - m.low) / 2 <= precision * m.value


@dataclass
class StageVerdict:
    ok: bool | None  # None: no data yet
    done: bool  # the stage may end
    why: str  # decided | stable | longest | over-saturated | waiting
    measures: list[Measure] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """The worst objective's value/threshold (above 1 fails)."""
        rs = [m.ratio for m in self.measures if m.ratio is not None]
        return max(rs) if rs else None


def conclusive(m: Measure) -> bool:
    """The reading is a verdict: its interval lies on one side of the threshold, or it has no
    interval (a rate or a share read exactly, e.g. error_rate, goodput)."""
    return m.decided or (m.exact and m.value is not None)


def judge_stage(
    measures: Sequence[Measure],
    ok_requests: int,
    elapsed_s: float,
    min_s: float,
    max_s: float,
    precision: float,
    stable_ends: bool = False,
) -> StageVerdict:
    """May the stage end, and with what verdict? Before `min_s` (after the window opened), no; a
    surely failing objective ends it; after MIN_OK successful requests, every objective conclusive
    ends it (`stable_ends`, the knee's test: or stable); at `max_s` it ends, inconclusive (ok None)
    while an interval still straddles its threshold: the point estimate alone is no verdict."""
    ms = list(measures)
    have = all(m.ok is not None for m in ms)
    ok = all(bool(m.ok) for m in ms) if have else None
    if elapsed_s >= max_s:
        if any(m.decided and not m.ok for m in ms):
            return StageVerdict(False, True, "longest", ms)
        if stable_ends or (have and all(conclusive(m) for m in ms)):
            return StageVerdict(ok, True, "longest", ms)
        return StageVerdict(None, True, "inconclusive", ms)
    if elapsed_s < min_s or not have:
        return StageVerdict(ok, False, "waiting", ms)
    if any(m.decided and not m.ok for m in ms):  # even from a few requests: the interval says so
        return StageVerdict(False, True, "decided", ms)
    if ok_requests < MIN_OK:
        return StageVerdict(ok, False, "waiting", ms)
    if all(conclusive(m) for m in ms):
        return StageVerdict(ok, True, "decided", ms)
    if stable_ends and all(m.decided or stable(m, precision) for m in ms):
        return StageVerdict(ok, True, "stable", ms)
    return StageVerdict(ok, False, "waiting", ms)
