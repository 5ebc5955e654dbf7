"""`--search`: the master chooses each next stage from the last stages' results.

`SwarmShape` (swarm/live/shape.py) hands its ticks to a `SearchController` when `--search` is
given. Each tick the controller reads the running stage from the master's merged aggregate
(`environment.swarm.stats.merged()`, the workers' deltas as they arrive). A new stage's
requests are warm-up until it has settled (`stats.settling.Settling`: a full turnover of the users
and no trend in the answered requests' TTFT, at least `--warmup`, at most `SETTLE_MAX_S`); then
the master opens its measurement window (the shape tells the workers) and asks
swarm/stats/stage_verdict.py whether the stage may end (the criterion decided after `--min-stage-time`;
at the latest after `--stage-time`, inconclusive if the interval still straddles the threshold),
records the probe (with how long the stage took to settle) and starts the load `Bracket.next_load` names, until the answer is known to
`--search-precision` or `--search-budget` is spent. The result lands on the state
(`environment.swarm.search`), from which the master writes summary.json `search` and sets the
exit code (0 converged, 1 the criterion not met even at the lowest load or no answer in the
budget).

Open-loop stages (`--search rate`, `--rate`) carry the over-saturation guard
(`stats.overload_guard.OverloadGuard`): requests offered and not finished, and the recent TTFT, rising
through `--saturation-guard` end the stage early (a failing probe, or the next `--rate` stage),
and the stage says why (`ended_by`). A closed loop cannot run away: each user waits for its
answer, so the backlog is bounded by the users.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from locust.runners import LocalRunner

from swarm.core.units import stage_name
from swarm.live.state import run_settings, swarm_state
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate, Cell
from swarm.stats.completion_rate import Completions
from swarm.stats.overload_guard import OverloadGuard
from swarm.stats.search_bracket import Bracket, Probe, headline
from swarm.stats.settling import SETTLE_MAX_S, SETTLE_WINDOW_S, Settling
from swarm.stats.stage_intervals import TailShare
from swarm.stats.stage_verdict import goodput_measure, judge_stage, measure, percentile_of, stability
from swarm.stats.wire import WIRE_KEY

logger = logging.getLogger(__name__)

REPORT_LAG_S = 3.0  # Locust workers report every 3 s: a stage's first completions reach the master this late
MIN_WARMUP_S = 2.0  # a new level needs a moment even without --warmup (users start, queues settle)
EXTEND = 2.0  # an inconclusive stage may run this many times --stage-time (budget permitting)


class Shape(Protocol):
    """What the controller needs of the load shape (swarm/live/shape.py `SwarmShape`)."""

    runner: Any

    def get_run_time(self) -> float: ...

    def _enter(self, index: int, users: int, warmup_s: float, rate: float | None = None) -> None: ...

    def _open_window(self, index: int, settled: bool) -> None: ...

    def _close(self) -> None: ...


def _aggregate(environment: Any) -> Aggregate | None:
    stats = swarm_state(environment).stats
    if stats is None or stats.merged is None:
        return None
    return stats.merged()


class StageMeter:
    """One running stage seen from the master: completions per second, backlog, recent TTFT.
    `warmup_s`: the least warm-up (the guard waits that long); `open_s`: when the measurement
    window opened (None while the stage settles)."""

    def __init__(
        self,
        index: int,
        start_s: float,
        warmup_s: float,
        rate: float | None,
        guard_s: float,
        done: Completions,
    ) -> None:
        self.index, self.start_s, self.warmup_s, self.rate = index, start_s, warmup_s, rate
        self.done = done  # the run's completions per worker report (shared by every stage)
        self.guard = OverloadGuard(guard_s)
        self._last: dict[str, tuple[int, float]] = {}  # latency -> (count, sum) at the last tick
        self.open_s: float | None = None
        self.settled: bool | None = None
        self.trend = "unknown"  # the settling test's last reading (an unsettled stage's direction)
        self.overloaded = False  # open loop, at the settling bound: fewer finished than were offered

    def tick(self, now: float, agg: Aggregate) -> Cell:
        cell = agg.combined(stage=self.index)
        if self.rate:  # the wait a user sees: how late the request went out (-u capped) + TTFT
            recent = self._recent("ttft", cell)
            lag = self._recent("send_lag", cell)
            if recent is not None and lag is not None:
                recent += lag
            offered = self.rate * (now - self.start_s)
            if now - self.start_s >= self.warmup_s + REPORT_LAG_S:
                self.guard.add(now, offered - cell.requests, recent)
        return cell

    def _recent(self, name: str, cell: Cell) -> float | None:
        """The mean of `name` over what arrived since the last tick (None: nothing new)."""
        sk = cell.latencies[name]
        count, total = sk.count, sk.sum
        last = self._last.get(name)
        self._last[name] = (count, total)
        if last is None or count <= last[0]:
            return None
        return (total - last[1]) / (count - last[0])

    @property
    def settle_s(self) -> float | None:
        return None if self.open_s is None else self.open_s - self.start_s

    def qps(self) -> float | None:
        """Completions per second since the window opened."""
        return None if self.open_s is None else self.done.rate(self.open_s)

    def qps_stable(self, precision: float) -> bool:
        """The knee's test: one standard error of the QPS within `precision` of it. (The error comes
        from report-to-report rates, which count a closed loop's short-term bursts: it overstates
        the error of the whole stage's mean, so one error, not two, is held to the precision.)"""
        qps = self.qps()
        if qps is None or self.open_s is None:
            return False
        half = self.done.rate_halfwidth(self.open_s, z=1.0)
        return qps is not None and half is not None and half <= precision * qps


class CompletionFeed:
    """Feeds a `Completions` from the workers' reports (a master) or the local aggregate (a local runner)."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.done = Completions()
        self.local = isinstance(environment.runner, LocalRunner)
        if not self.local:
            environment.events.worker_report.add_listener(self._on_report)

    def _on_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(WIRE_KEY)
        if not payload:
            return
        self.done.add(client_id, time.time(), Aggregate.finished_in(payload))

    def tick(self, now: float, agg: Aggregate) -> None:
        if self.local:
            self.done.set_total("local", now, sum(c.requests for c in agg))


class SearchController:
    def __init__(self, environment: Any) -> None:
        self.environment = environment
        settings = self.settings = run_settings(environment)
        assert settings.search is not None  # (the shape runs a search only then)
        self.spec = settings.search
        self.objectives = self.spec.objectives()
        self.warmup_s = max(MIN_WARMUP_S, settings.warmup_s)
        self.min_s = settings.min_stage_s
        self.max_s = settings.stage_s
        self.guard_s = settings.saturation_guard_s
        self.cap = settings.users or 1  # open loop: the in-flight cap
        self.bracket = Bracket(self.spec)
        self.meter: StageMeter | None = None
        self.settling: Settling | None = None
        self.tails: dict[str, TailShare] = {}
        self.level: float | None = None
        self.done = False
        self.started_s = time.time()
        self.feed = CompletionFeed(environment)

    # ---- one tick --------------------------------------------------------------------------
    def tick(self, shape: Shape) -> tuple[int, float] | None:
        if self.done:
            return None
        now = time.time()
        if self.meter is None:
            return self._start(shape, now)
        budget_left = self.spec.budget_s - (now - self.started_s)
        agg = _aggregate(self.environment)
        if agg is None:  # no statistics on this runner: nothing to judge by
            return self._finish(shape, "budget") if budget_left <= 0 else self._load()
        self.feed.tick(now, agg)
        cell = self.meter.tick(now, agg)
        if self.meter.open_s is None:  # settling: the window opens once the stage is steady
            if self.meter.guard.tripped():
                self._record(cell, False, self.meter.guard.why(), [], now)
                return self._finish(shape, "budget") if budget_left <= 0 else self._start(shape, now)
            if budget_left <= 0:
                return self._finish(shape, "budget")
            self._settle(shape, cell, now)
            return self._load()
        elapsed = now - self.meter.open_s
        verdict = self._judge(agg, cell, elapsed, budget_left)
        if verdict is None:
            return self._load()
        ok, ended_by, measures = verdict
        # judged in a window that opened before steady state: no verdict, except a fail while the
        # TTFT was still rising or fewer finished than were offered (the queue grows past the
        # objective and does not stop)
        rising_fail = ok is False and (self.meter.trend == "rising" or self.meter.overloaded)
        if self.meter.settled is False and self.spec.mode != "knee" and not rising_fail:
            ok, ended_by = None, f"unsettled ({ended_by})"
        self._record(cell, ok, ended_by, measures, now)
        if budget_left <= 0:
            return self._finish(shape, "budget")
        return self._start(shape, now)

    def _judge(
        self, agg: Aggregate, cell: Cell, elapsed: float, budget_left: float
    ) -> tuple[bool | None, str, list[Any]] | None:
        """(verdict, why the stage ended, measures) when the stage ends now; None to go on."""
        meter = self.meter
        assert meter is not None
        if meter.guard.tripped():
            return False, meter.guard.why(), []
        ok_requests = cell.latencies["e2e"].count
        longest = min(self.max_s, elapsed + max(0.0, budget_left))
        if self.spec.mode == "knee":  # stable TTFT p99 and QPS, or the longest
            ttft = stability(cell.latencies["ttft"], 0.99, "ttft_p99")
            stage = judge_stage(
                [ttft], ok_requests, elapsed, self.min_s, longest, self.spec.precision, stable_ends=True
            )
            if stage.done and meter.qps_stable(self.spec.precision):
                return True, stage.why, []
            if elapsed < longest:
                return None
            # at its longest without its readings (a window shorter than two reports of each
            # worker, or than the answers' TTFT: every user answered once): up to EXTEND times
            # --stage-time, budget permitting; a stage still without a TTFT then is past the knee
            unread = meter.qps() is None or cell.latencies["ttft"].count < (self.level or 1)
            if unread and elapsed < EXTEND * self.max_s and budget_left > 0:
                return None
            return True, "longest", []
        blocks = self._blocks(agg, cell, elapsed)
        measures = []
        at_threshold = False  # a tail share read within a factor 2 of its limit
        for o in self.objectives:
            sketches = _sketches(agg, o.workload, meter.index)
            tail = None
            pq = percentile_of(o)
            if pq is not None and pq[0] in sketches:  # "pNN <= T": the share of answers above T
                sk = sketches[pq[0]]
                tracker = self.tails.setdefault(o.text, TailShare())
                tracker.add(time.time(), sk.count, sk.count_above(o.threshold))
                tail = tracker.interval()
                allowed = 1 - pq[1]
                at_threshold |= tail is not None and allowed / 2 <= tail[0] <= 2 * allowed
            measures.append(
                measure(o, blocks.get(o.workload) or {}, sketches, tail=tail, tail_judged=pq is not None)
            )
        if self.spec.goodput_min is not None:
            measures.append(goodput_measure(blocks.get("total") or {}, self.spec.goodput_min))
        if elapsed >= self.max_s and not at_threshold:
            # an undecided stage whose tail share lies clearly on one side of its limit gets its
            # longest once more, if the budget has it: a load a few percent below the crossing
            # needs ~30 s for its verdict (one at the crossing would not have one in any time)
            longest = min(EXTEND * self.max_s, elapsed + max(0.0, budget_left - self.max_s))
        stage = judge_stage(measures, ok_requests, elapsed, self.min_s, longest, self.spec.precision)
        return (stage.ok, stage.why, stage.measures) if stage.done else None

    def _blocks(self, agg: Aggregate, cell: Cell, elapsed: float) -> dict[str, Any]:
        meter = self.meter
        assert meter is not None
        duration = max(elapsed, 1e-9)
        good = self.settings.goodput  # --goodput: blocks carry `goodput`
        kw: dict[str, Any] = {"goodput_slo": good.text} if good is not None else {}
        out: dict[str, Any] = {"total": dict(summary.block(cell, duration, **kw))}
        for name in agg.workloads():
            out[name] = dict(summary.block(agg.combined(workload=name, stage=meter.index), duration, **kw))
        qps = meter.qps()
        if qps is not None:
            out["total"]["qps"] = qps
        return out

    def _record(self, cell: Cell, ok: bool | None, ended_by: str, measures: list[Any], now: float) -> None:
        meter = self.meter
        assert meter is not None and self.level is not None
        ratios = [m.ratio for m in measures if m.ratio is not None]
        probe = Probe(
            stage=meter.index,
            load=self.level,
            ok=ok,
            qps=meter.qps(),
            ttft_p99=cell.latencies["ttft"].quantile(0.99),
            ratio=max(ratios) if ratios else None,
            duration_s=round(now - meter.start_s, 2),
            ended_by=ended_by,
            values={m.objective: m.value for m in measures},
            settle_s=None if meter.settle_s is None else round(meter.settle_s, 2),
            settled=meter.settled,
        )
        self.bracket.record(probe)
        timeline = swarm_state(self.environment).stage.timeline
        if timeline and timeline[-1].index == meter.index:
            timeline[-1].ended_by = ended_by
        lo, hi = probe.bracket
        logger.info(
            "swarm: search: %g %s -> %s (%s; %s; QPS %s, TTFT p99 %s); bracket %s-%s",
            self.level,
            self.spec.unit,
            self._verdict(probe),
            ended_by,
            settle_text(probe.settle_s, probe.settled),
            "-" if probe.qps is None else f"{probe.qps:.1f}",
            "-" if probe.ttft_p99 is None else f"{probe.ttft_p99 * 1000:.0f} ms",
            lo,
            hi,
        )

    def _verdict(self, probe: Probe) -> str:
        if self.spec.mode == "knee":  # every knee probe is "ok": where it lies is the verdict
            return "below the knee" if self.bracket.passes(probe) else "at or past the knee"
        return "inconclusive" if probe.ok is None else ("pass" if probe.ok else "fail")

    def _start(self, shape: Shape, now: float) -> tuple[int, float] | None:
        level = self.bracket.next_load()
        if level is None:
            return self._finish(shape, self.bracket.status)
        index = 0 if self.meter is None else self.meter.index + 1
        self.level = level
        rate = level if self.spec.mode == "rate" else None
        self.meter = StageMeter(index, now, self.warmup_s, rate, self.guard_s, self.feed.done)
        # a full turnover: every user answered once under the new load (open loop: one sub-window's arrivals)
        need = int(level * SETTLE_WINDOW_S) if rate else int(level)
        self.settling = Settling(now, need, self.warmup_s)
        self.tails: dict[str, TailShare] = {}  # objective -> its share above the threshold, this stage
        # the workers' own warm-up timer is the settling bound: the window opens then at the latest
        shape._enter(index, self._users(), max(SETTLE_MAX_S, self.warmup_s), rate)
        return self._load()

    def _settle(self, shape: Shape, cell: Cell, now: float) -> None:
        """Feed the settling test; open the window when the stage has settled or may wait no longer."""
        meter, settling = self.meter, self.settling
        assert meter is not None and settling is not None
        settling.add(now, int(cell.warmup_ttft[0]), float(cell.warmup_ttft[1]))
        if meter.rate:  # open loop: the backlog must neither grow nor drain (finished/s = offered)
            settling.note_flow(self.feed.done.rate(now - 3 * SETTLE_WINDOW_S), meter.rate)
        settled = settling.decide(now)
        if settled is None:
            return
        meter.trend, meter.overloaded = settling.trend(), settling.overloaded()
        meter.open_s, meter.settled = now, settled
        shape._open_window(meter.index, settled)
        logger.info(
            "swarm: search: %g %s %s", self.level, self.spec.unit, settle_text(meter.settle_s, settled)
        )

    def _users(self) -> int:
        return self.cap if self.spec.mode == "rate" else int(self.level or 1)

    def _load(self) -> tuple[int, float]:
        users = self._users()
        spawn = float(self.settings.spawn_rate or users)
        return users, max(float(users), spawn)

    def _finish(self, shape: Shape, status: str) -> None:
        self.bracket.status = status
        self.done = True
        shape._close()
        result = self.bracket.answer()
        result["duration_s"] = round(time.time() - self.started_s, 2)
        result["headline"] = headline(result)
        swarm_state(self.environment).search = result
        logger.info("swarm: %s", result["headline"])
        return None


def settle_text(settle_s: float | None, settled: bool | None) -> str:
    """'settled after 9 s' / 'unsettled after 30 s' (the window opened at the bound)."""
    if settle_s is None:
        return "never opened its window"
    return f"{'settled' if settled else 'unsettled'} after {settle_s:.0f} s"


def _sketches(agg: Aggregate, workload: str, stage: int) -> Mapping[str, Any]:
    cell = agg.combined(stage=stage) if workload == "total" else agg.combined(workload=workload, stage=stage)
    return cell.latencies


class RateGuard:
    """The over-saturation guard of one `--rate` stage: `tripped()` once a tick; when it trips
    the stage's timeline entry says why and the shape starts the next stage."""

    def __init__(self, environment: Any, meter: StageMeter) -> None:
        self.environment, self.meter = environment, meter

    @classmethod
    def for_stage(cls, environment: Any, index: int, warmup_s: float, rate: float) -> RateGuard | None:
        guard_s = run_settings(environment).saturation_guard_s
        if guard_s <= 0:
            return None
        return cls(environment, StageMeter(index, time.time(), warmup_s, rate, guard_s, Completions()))

    def tripped(self) -> bool:
        agg = _aggregate(self.environment)
        if agg is None:
            return False
        self.meter.tick(time.time(), agg)
        if not self.meter.guard.tripped():
            return False
        why = self.meter.guard.why()
        timeline = swarm_state(self.environment).stage.timeline
        if timeline and timeline[-1].index == self.meter.index:
            timeline[-1].ended_by = why
        logger.warning("swarm: %s ended early: %s", stage_name(self.meter.index), why)
        return True
