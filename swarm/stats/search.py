"""The maths of `swarm run --search`: what a stage measured, when it may end, where to probe next.

Pure (no Locust, no clock): the master's search shape (swarm/live/search.py) feeds it numbers
and acts on its answers; the unit tests feed it made-up curves.

- `SearchSpec.parse`: `--search concurrency|rate|knee`, the criterion (`--slo` objectives or
  `--goodput-min`), `--search-precision` (default 5%), `--search-budget` (default 10m).
- `quantile_ci`: a distribution-free confidence interval of a quantile read from a sketch: the
  order statistics whose ranks bracket q*n by z binomial standard deviations (the textbook
  interval for a quantile, e.g. Conover, *Practical Nonparametric Statistics*, 3.2), read at
  those ranks from the merged DDSketch (0.5% relative on top).
- `Settling`: when a stage's measurement window may open: the requests sent under the new load
  have turned over once (the previous stage's backlog drained) and their mean TTFT no longer moves
  between consecutive sub-windows; at the latest after `SETTLE_MAX_S` (then the stage is unsettled
  and its figures are no verdict).
- `judge_stage`: a stage's verdict on the criterion and whether it may end: a verdict only when
  every latency objective's interval lies on one side of its threshold (decided); at its longest
  a stage whose interval still straddles the threshold is inconclusive (ok None), and an
  inconclusive probe never narrows the bracket. (The knee's stability test ends a stage whose
  interval is narrower than the precision.)
- `Bracket`: the search itself. Concurrency/rate: the highest load meeting the criterion.
  Double from the start level until a probe fails (halve until one passes), then probe inside
  the bracket where the worst objective's ratio to its threshold, interpolated in log space
  between the bracket's ends, crosses 1, clamped to the bracket's middle half (so each probe
  cuts at least a quarter of the bracket away: never slower than 1.4x bisection, much faster
  where latency grows smoothly); done when the bracket is narrower than the precision of its
  lower end. Loads probed inconclusive inside the bracket are not probed again: the search narrows
  the gaps beside them, and when those are narrower than the precision it ends `noise_limited`
  (the crossing lies within the measurement noise of those loads). Knee: the lowest load whose QPS is within `KNEE_SHARE` of the plateau (the highest
  QPS seen; every higher load counts as on it) whose TTFT p99 is also `KNEE_LATENCY` times its
  value at half the load ("QPS stops growing while latency climbs"), found the same way after
  doubling until QPS grows less than `KNEE_GROWTH`, by bisection.
- `OverloadGuard`: the over-saturation stop for every run: the backlog (requests offered and
  not finished) and recent TTFT both rising through `guard_s`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from swarm.core.errors import UsageError
from swarm.core.units import parse_timespan
from swarm.stats import slo
from swarm.stats.quantiles import Sketch

MODES = ("concurrency", "rate", "knee")
Mode = Literal["concurrency", "rate", "knee"]
Z_95 = 1.96
# Latencies of one stage are not independent draws: a closed loop moves in waves and a queue
# carries from one request to the next. A stage's verdict uses an interval as wide as for a
# quarter of its requests (a design effect of 4: z doubled), so a stage near the threshold runs
# longer instead of ending on a lucky few seconds.
Z_STAGE = 2 * Z_95
KNEE_SHARE = 0.90  # the knee: QPS at this share of the plateau (the highest seen) or more: on the plateau (10%: twice a stage's QPS noise)
KNEE_LATENCY = 2.0  # ... and whose TTFT p99 is this many times its value at half the load
KNEE_SPAN = 4.0  # knee: a plateau this many times wide without a latency climb ends the search
KNEE_GROWTH = 0.20  # doubling the load raised QPS less than this: the plateau is in sight (elasticity 0.26)
STALE_S = 10.0  # a worker that has not reported for this long while others do is gone (Locust: every 3 s)
MIN_OK = 50  # successful requests a stage needs before its percentiles are judged
MAX_CONCURRENCY = 4096
MAX_RATE = 10000.0
DEFAULT_BUDGET = "10m"
DEFAULT_PRECISION = 0.05
# Settling (the window of a stage opens once the load it changed to has reached steady state)
SETTLE_WINDOW_S = 3.0  # a sub-window: about one report of every worker (Locust reports every 3 s)
SETTLE_TOL = 0.15  # two consecutive sub-windows' mean TTFT this close: no trend (steady windows differ ~10%)
SETTLE_MIN_N = 20  # answered requests a sub-window needs before its mean is compared
SETTLE_MAX_S = 30.0  # the longest a stage may wait to settle; then its window opens unsettled
SETTLE_FLOW_TOL = (
    0.10  # open loop: finished/s within this of the offered rate (no backlog growing or draining)
)


def parse_share(text: str, flag: str) -> float:
    """`95%` or `0.95` -> 0.95 (0 < share <= 1)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"bad {flag} {text!r}: give a share, e.g. 95% or 0.95") from None
    if not 0 < v <= 1:
        raise UsageError(f"bad {flag} {text!r}: must be above 0% and at most 100%")
    return v


@dataclass(frozen=True)
class SearchSpec:
    """What `--search` asks for, validated."""

    mode: Mode
    slo_text: str | None = None
    goodput_min: float | None = None  # share of requests meeting --goodput, 0..1
    precision: float = DEFAULT_PRECISION
    budget_s: float = 600.0
    start: float = 16.0  # first load probed: users (concurrency, knee) or requests/s (rate)

    @classmethod
    def parse(
        cls,
        mode: str,
        slo_text: str | None,
        goodput_min: str | None,
        precision: str | None,
        budget: str | None,
        start: float,
        goodput_text: str | None = None,
    ) -> SearchSpec:
        if mode not in MODES:
            raise UsageError(f"bad --search {mode!r}: one of {', '.join(MODES)}")
        share = parse_share(goodput_min, "--goodput-min") if goodput_min else None
        if mode == "knee":
            if slo_text or share is not None:
                raise UsageError(
                    "--search knee takes no --slo or --goodput-min: it finds where QPS stops growing"
                )
        elif not slo_text and share is None:
            raise UsageError(
                f'--search {mode} needs a criterion: --slo "ttft_p99<=800ms" or --goodput-min 95%'
            )
        if share is not None and not goodput_text:
            raise UsageError("--goodput-min needs --goodput (the per-request objectives it counts)")
        if slo_text:
            slo.parse(slo_text)
        p = parse_share(precision, "--search-precision") if precision else DEFAULT_PRECISION
        if p >= 0.5:
            raise UsageError(f"bad --search-precision {precision!r}: below 50%, e.g. 5%")
        budget_s = float(parse_timespan(budget or DEFAULT_BUDGET, "--search-budget"))
        if budget_s <= 0:
            raise UsageError("--search-budget must be > 0, e.g. 10m")
        if not start > 0:
            raise UsageError("the search's start load must be > 0")
        return cls(mode, slo_text or None, share, p, budget_s, float(start))  # type: ignore[arg-type]

    @property
    def unit(self) -> str:
        return "req/s" if self.mode == "rate" else "users"

    def objectives(self) -> list[slo.Objective]:
        return slo.parse(self.slo_text) if self.slo_text else []


# ----------------------------------------------------------------------------------- one stage


def quantile_ci(sketch: Sketch, q: float, z: float = Z_95) -> tuple[float, float] | None:
    """(low, high): a ~95% interval of the q-quantile of the population the sketch sampled, from
    the order statistics at ranks q*n -/+ z*sqrt(n q (1-q)). None when empty."""
    n = sketch.count
    if n == 0:
        return None
    half = z * math.sqrt(q * (1 - q) / n)
    lo = sketch.quantile(max(0.0, q - half))
    hi = sketch.quantile(min(1.0, q + half)) if q + half < 1 else sketch.max
    if lo is None or hi is None:
        return None
    return float(lo), float(hi)


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


# Student's t, 97.5% (a two-sided 95% interval), by degrees of freedom: a few batches' spread
# estimates the error loosely, so their interval is wider than the normal one.
T_975 = (12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145)
MIN_BATCHES = 3  # sub-windows a tail share needs before it is judged
DESIGN_EFFECT = 4.0  # answers per independent draw, at least (as Z_STAGE assumes)
# A percentile whose whole interval (order statistics, Z_STAGE) lies below 3/4 of the threshold,
# or above 4/3 of it, after MIN_BATCHES sub-windows, is decided by its magnitude: a tail share
# with no answer above T says little in a few hundred answers that come in waves (64 users at
# 43 req/s needed 30 s), but a p99 of 100 ms is no near miss of 800 ms.
FAR = 0.75


@dataclass
class TailShare:
    """The share of a stage's answers above an objective's threshold, with a 95% interval.

    "p99 <= T" holds exactly when at most 1% of the answers exceed T. Answers close in time share
    a queue (a closed loop moves in waves: a whole batch of the engine waits together), so the
    share's uncertainty is read from how it varies between consecutive SETTLE_WINDOW_S
    sub-windows (batch means, the ratio estimator's variance, Student's t on their number),
    and never taken below the binomial error of a quarter of the answers counted (the design
    effect of 4 that `Z_STAGE` assumes: a few sub-windows without one answer above T say little
    when answers above it come a wave at a time). The
    order-statistics interval of `quantile_ci` assumes independent answers: within a few seconds
    it read a stage that exceeds T 1% of the time as surely passing (every answer of one wave
    below T)."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, answered, above), cumulative

    def add(self, t: float, answered: int, above: int) -> None:
        if not self.samples or answered != self.samples[-1][1]:
            self.samples.append((t, answered, above))

    def batches(self) -> list[tuple[int, int]]:
        """(answered, above) per sub-window of at least SETTLE_WINDOW_S, from the first sample."""
        out = []
        t0, n0, a0 = self.samples[0] if self.samples else (0.0, 0, 0)
        for t, n, a in self.samples[1:]:
            if t - t0 >= SETTLE_WINDOW_S and n > n0:
                out.append((n - n0, a - a0))
                t0, n0, a0 = t, n, a
        return out

    def interval(self) -> tuple[float, float] | None:
        """(share above, half-width of its 95% interval); None before MIN_BATCHES sub-windows."""
        bs = self.batches()
        k = len(bs)
        if k < MIN_BATCHES:
            return None
        n = sum(b[0] for b in bs)
        share = sum(b[1] for b in bs) / n
        var_batch = k / (k - 1) * sum((a - share * m) ** 2 for m, a in bs) / n**2
        var_binom = DESIGN_EFFECT * max(share, 1 / n) * (1 - share) / n
        t = T_975[k - 2] if k - 2 < len(T_975) else Z_95
        return share, t * math.sqrt(max(var_batch, var_binom))


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


@dataclass
class Settling:
    """Has the stage that started at `start_s` reached steady state? Fed the stage's answered
    warm-up requests (cumulative count and TTFT sum, as the master's aggregate holds them) each
    tick; settled once `need` of them were answered (a full turnover: every request of the stage
    before has finished and each user has waited through the new queue), at least `min_s` after
    the start, and the mean TTFT of the last two SETTLE_WINDOW_S sub-windows differ by at most
    SETTLE_TOL (no trend: the queue the new load builds, or the backlog the old one left, has
    reached its level)."""

    start_s: float
    need: int
    min_s: float = 0.0
    max_s: float = SETTLE_MAX_S  # the bound: the window opens then, settled or not
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # (t, count, TTFT sum)
    flow: tuple[float | None, float] | None = None  # open loop: (finished/s recently, offered/s)

    def __post_init__(self) -> None:
        if not self.samples:  # the stage's cell starts empty
            self.samples.append((self.start_s, 0, 0.0))

    def add(self, t: float, count: int, ttft_sum: float) -> None:
        if not self.samples or count != self.samples[-1][1] or t - self.samples[-1][0] >= SETTLE_WINDOW_S:
            self.samples.append((t, count, ttft_sum))

    def _before(self, end: tuple[float, int, float]) -> tuple[float, int, float] | None:
        """The sample that opens the sub-window ending at `end`: the last one at least
        SETTLE_WINDOW_S before it with at least SETTLE_MIN_N answers between (a slow stage's
        sub-windows stretch until they hold enough)."""
        best = None
        for s in self.samples:
            if s[0] > end[0] - SETTLE_WINDOW_S or s[1] > end[1] - SETTLE_MIN_N:
                break
            best = s
        return best

    def means(self) -> tuple[float, float] | None:
        """Mean TTFT of the last two sub-windows (earlier, later); None until both exist."""
        if not self.samples:
            return None
        c = self.samples[-1]
        b = self._before(c)
        a = self._before(b) if b is not None else None
        if a is None or b is None:
            return None
        return (b[2] - a[2]) / (b[1] - a[1]), (c[2] - b[2]) / (c[1] - b[1])

    def settled(self, t: float) -> bool:
        if t - self.start_s < self.min_s or not self.samples or self.samples[-1][1] < self.need:
            return False
        if not self.flowing():
            return False
        m = self.means()
        return m is not None and abs(m[1] - m[0]) <= SETTLE_TOL * max(m)

    def note_flow(self, finished_per_s: float | None, offered_per_s: float) -> None:
        """Open loop: requests finished per second (every stage's) over the last sub-windows, and
        the rate offered. A closed loop's turnover covers what this checks there."""
        self.flow = (finished_per_s, offered_per_s)

    def overloaded(self) -> bool:
        """Open loop: fewer finish than are offered (beyond SETTLE_FLOW_TOL): the backlog grows."""
        if self.flow is None or self.flow[0] is None:
            return False
        done, offered = self.flow
        return done < (1 - SETTLE_FLOW_TOL) * offered

    def flowing(self) -> bool:
        """Open loop: the server finishes what is offered, within SETTLE_FLOW_TOL (nothing noted:
        yes). A backlog left by a stage above the ceiling drains at (ceiling - rate): more finish
        than arrive, for a minute, while the mean TTFT falls by less than SETTLE_TOL a sub-window
        (--search rate judged 53.5 req/s failing after 80 and 62.5 on a queue still 400 deep)."""
        if self.flow is None:
            return True
        done, offered = self.flow
        return done is not None and abs(done - offered) <= SETTLE_FLOW_TOL * offered

    def trend(self) -> str:
        """'rising', 'falling' or 'flat' between the last two sub-windows; 'unknown' without them."""
        m = self.means()
        if m is None:
            return "unknown"
        if abs(m[1] - m[0]) <= SETTLE_TOL * max(m):
            return "flat"
        return "rising" if m[1] > m[0] else "falling"

    def timed_out(self, t: float) -> bool:
        return t - self.start_s >= max(self.max_s, self.min_s)

    def decide(self, t: float) -> bool | None:
        """True: settled, open the window; False: the bound passed unsettled (open it, its figures
        are no verdict); None: wait. At the bound, a stage with too few answers to compare two
        sub-windows that has turned over twice counts as settled (a load this slow builds no queue)."""
        if self.settled(t):
            return True
        if not self.timed_out(t):
            return None
        return self.flowing() and self.trend() == "unknown" and self.samples[-1][1] >= 2 * self.need


# ----------------------------------------------------------------------------------- the search


@dataclass
class Probe:
    """One probed load and what it gave (summary.json `search.probes`)."""

    stage: int
    load: float
    ok: bool | None
    qps: float | None
    ttft_p99: float | None
    ratio: float | None  # worst objective's value/threshold (above 1 fails); knee: None
    duration_s: float
    ended_by: str
    values: dict[str, float | None] = field(default_factory=dict)  # objective text -> measured
    bracket: tuple[float | None, float | None] = (None, None)  # (passing, failing) after this probe
    settle_s: float | None = None  # seconds from the stage's start until its window opened
    settled: bool | None = None  # False: the window opened at SETTLE_MAX_S, before steady state


@dataclass
class Bracket:
    """The search's state: probes so far, the bracket, the next load."""

    spec: SearchSpec
    probes: list[Probe] = field(default_factory=list)
    status: str = "running"  # running | converged | noise_limited | not_met | no_failure | budget

    @property
    def integer(self) -> bool:
        return self.spec.mode != "rate"

    @property
    def max_load(self) -> float:
        return MAX_RATE if self.spec.mode == "rate" else MAX_CONCURRENCY

    @property
    def min_load(self) -> float:
        return 1.0 if self.integer else 0.01

    def passes(self, p: Probe) -> bool:
        """Knee: before the knee (QPS short of the plateau, or TTFT p99 not yet KNEE_LATENCY times
        its value at half the load); else: meets the criterion."""
        if self.spec.mode != "knee":
            return bool(p.ok)
        if self._scaling(p):
            return True
        climb = self.climb(p)
        return climb is not None and climb < KNEE_LATENCY

    def climb(self, p: Probe) -> float | None:
        """Knee: TTFT p99 at this probe over TTFT p99 at half its load."""
        half = self.ttft_at(p.load / 2)
        return None if half is None or not half or p.ttft_p99 is None else p.ttft_p99 / half

    def _plateau_start(self) -> float | None:
        """Knee: the lowest load whose QPS reached KNEE_SHARE of the plateau."""
        top = KNEE_SHARE * self.plateau()
        return min((p.load for p in self.probes if (p.qps or 0.0) >= top), default=None)

    def _scaling(self, p: Probe) -> bool:
        """Below the plateau's start: QPS still grows with the load (a load above it whose QPS
        reads a little lower is an overloaded server or noise, not growth)."""
        start = self._plateau_start()
        return start is None or p.load < start

    def ttft_at(self, load: float) -> float | None:
        """Knee: TTFT p99 at `load`, linear between the probes around it (the nearest end outside)."""
        pts = sorted((p.load, p.ttft_p99) for p in self.probes if p.ttft_p99 is not None)
        if not pts:
            return None
        if load <= pts[0][0]:
            return pts[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            if x0 <= load <= x1:
                return y0 + (y1 - y0) * (load - x0) / (x1 - x0) if x1 > x0 else y1
        return pts[-1][1]

    def plateau(self) -> float:
        return max((p.qps or 0.0 for p in self.probes), default=0.0)

    def bounds(self) -> tuple[Probe | None, Probe | None]:
        """(highest passing probe below the lowest failing one, lowest failing probe)."""
        # a probe the budget cut before its verdict (ok None) says nothing either way
        decided = [p for p in self.probes if p.ok is not None or self.spec.mode == "knee"]
        fails = [p for p in decided if not self.passes(p)]
        hi = min(fails, key=lambda p: p.load) if fails else None
        passes = [p for p in decided if self.passes(p) and (hi is None or p.load < hi.load)]
        lo = max(passes, key=lambda p: p.load) if passes else None
        return lo, hi

    def _saturated_seen(self) -> bool:
        """Knee: a doubling that raised QPS less than KNEE_GROWTH (the plateau is in sight)."""
        return any(
            b.load >= 1.5 * a.load and (b.qps or 0.0) < (1 + KNEE_GROWTH) * (a.qps or 0.0)
            for a, b in itertools.permutations(self.probes, 2)
        )

    def _round(self, x: float) -> float:
        return float(round(x)) if self.integer else float(f"{x:.3g}")

    def converged(self, lo: float, hi: float) -> bool:
        step = 1.0 if self.integer else 0.0
        return hi - lo <= max(step, self.spec.precision * lo)

    def record(self, probe: Probe) -> None:
        self.probes.append(probe)
        lo, hi = self.bounds()
        probe.bracket = (lo.load if lo else None, hi.load if hi else None)

    def next_load(self) -> float | None:
        """The next load to probe, or None when the search is over (see `status`)."""
        if not self.probes:
            return self._round(min(self.max_load, self.spec.start))
        lo, hi = self.bounds()
        knee = self.spec.mode == "knee"
        if knee and not self._saturated_seen():
            top = max(p.load for p in self.probes)
            if top >= self.max_load:
                self.status = "no_failure"
                return None
            return self._round(min(self.max_load, top * 2))
        if hi is None:  # every probe passes: go up
            top = max(p.load for p in self.probes)
            plateau = [p.load for p in self.probes if knee and not self._scaling(p)]
            if top >= self.max_load or (plateau and top >= KNEE_SPAN * min(plateau)):
                self.status = "no_failure"
                return None
            return self._round(min(self.max_load, top * 2))
        if lo is None:  # every probe fails: go down
            if hi.load <= self.min_load:
                self.status = "not_met"
                return None
            return self._round(max(self.min_load, hi.load / 2))
        if self.converged(lo.load, hi.load):
            self.status = "converged"
            return None
        band = self.inconclusive(lo.load, hi.load)
        if band:
            return self._beside(lo.load, hi.load, band)
        x = self._interpolate(lo, hi)
        w = hi.load - lo.load
        x = min(max(x, lo.load + w / 4), hi.load - w / 4)
        x = self._round(x)
        if x <= lo.load or x >= hi.load:  # integer bracket of width 2-3: the middle
            x = self._round((lo.load + hi.load) / 2)
        if x <= lo.load or x >= hi.load:
            self.status = "converged"
            return None
        return x

    def inconclusive(self, lo: float, hi: float) -> list[float]:
        """Loads inside (lo, hi) probed without a verdict (their interval straddled the threshold,
        or the stage never settled), in order."""
        if self.spec.mode == "knee":
            return []
        return sorted({p.load for p in self.probes if p.ok is None and lo < p.load < hi})

    def _beside(self, lo: float, hi: float, band: list[float]) -> float | None:
        """The next load beside the inconclusive `band` (it lies near the crossing): half the
        precision below it while the gap below is wider than that (the answer is the passing end),
        then as far above it; None (`noise_limited`) when both gaps are that narrow: the crossing
        lies within the noise of the loads between."""
        tried = {p.load for p in self.probes}
        step = 1.0 if self.integer else 0.0
        near = max(step, self.spec.precision * band[0] / 2)  # (lo may lie far below the band)
        for a, b, x in ((lo, band[0], band[0] - near), (band[-1], hi, band[-1] + near)):
            if b - a <= near:
                continue
            mid = (a + b) / 2  # a gap under twice `near`: its middle (not a load next to its far end)
            x = self._round(max(x, mid) if b == band[0] else min(x, mid))
            if not a < x < b or x in tried:
                x = self._round((a + b) / 2)
            if a < x < b and x not in tried:
                return x
        self.status = "noise_limited"
        return None

    def _interpolate(self, lo: Probe, hi: Probe) -> float:
        """Where the criterion's ratio crosses 1 between the ends, in log space; the midpoint when
        unknown, and for the knee (bisection)."""
        mid = (lo.load + hi.load) / 2
        if self.spec.mode == "knee":  # TTFT p99 rises off a cliff at a knee: interpolation lands at an end
            return mid
        ra, rb = lo.ratio, hi.ratio
        if ra is None or rb is None or ra <= 0 or rb <= ra:
            return mid
        la, lb = math.log(ra), math.log(rb)
        return lo.load + (hi.load - lo.load) * (0.0 - la) / (lb - la)

    def answer(self) -> dict[str, Any]:
        """summary.json `search` (without the run's extras the shape adds)."""
        lo, hi = self.bounds()
        best = (hi if self.spec.mode == "knee" else lo) if self.probes else None
        return {
            "mode": self.spec.mode,
            "criterion": self.criterion(),
            "precision": self.spec.precision,
            "budget_s": self.spec.budget_s,
            "status": self.status,
            # the search ended with a bracket of measured verdicts: at the precision, or as narrow as
            # the measurement noise around the crossing allows (noise_limited)
            "converged": self.status in ("converged", "noise_limited"),
            "unit": self.spec.unit,
            "answer": best.load if best else None,
            "bracket": [lo.load if lo else None, hi.load if hi else None],
            "qps": best.qps if best else None,
            "ttft_p99_s": best.ttft_p99 if best else None,
            "answer_stage": best.stage if best else None,
            "plateau_qps": self.plateau() if self.spec.mode == "knee" else None,
            "probes": [asdict(p) | {"bracket": list(p.bracket)} for p in self.probes],
        }

    def criterion(self) -> str:
        if self.spec.mode == "knee":
            return (
                f"QPS within {round((1 - KNEE_SHARE) * 100)}% of the plateau and TTFT p99 over "
                f"{KNEE_LATENCY:g}x its value at half the load"
            )
        parts = [self.spec.slo_text] if self.spec.slo_text else []
        if self.spec.goodput_min is not None:
            parts.append(f"goodput >= {self.spec.goodput_min * 100:g}%")
        return ", ".join(p for p in parts if p)


def headline(search: Mapping[str, Any]) -> str:
    """The one line `swarm run` prints: 'max concurrency meeting the SLO: 152 (bracket 148-156), ...'."""

    def num(v: float | None) -> str:
        return "-" if v is None else (f"{v:g}" if v != int(v) else f"{int(v)}")

    mode, status = search.get("mode"), search.get("status")
    lo, hi = (search.get("bracket") or [None, None])[:2]
    what = {"concurrency": "max concurrency", "rate": "max request rate"}.get(str(mode), "knee")
    crit = (
        "the SLO"
        if search.get("criterion") and "goodput" not in str(search["criterion"])
        else "the criterion"
    )
    qps = search.get("qps")
    ttft = search.get("ttft_p99_s")
    tail = ""
    if qps is not None:
        tail += f", QPS {qps:.1f}"
    if ttft is not None:
        tail += f", TTFT p99 {ttft * 1000:.0f} ms"
    unit = " req/s" if mode == "rate" else ""
    if status == "not_met":
        return (
            f"search: {crit} is not met even at the lowest load ({num(hi)}{unit}): {search.get('criterion')}"
        )
    top = max((p["load"] for p in search.get("probes") or []), default=lo)
    if status == "no_failure" and mode == "knee":
        return f"search: no knee: QPS reached its plateau but TTFT p99 did not climb up to {num(top)} users"
    if status == "no_failure":
        return f"search: no failure up to {num(top)}{unit} (the search's top): the answer lies higher"
    bracket = f"(bracket {num(lo)}-{num(hi)}{unit})"
    if mode == "knee":
        head = f"knee (saturation point): {num(search.get('answer'))}{' req/s' if mode == 'rate' else ' users'} {bracket}"
    else:
        head = f"{what} meeting {crit}: {num(search.get('answer'))}{unit} {bracket}"
    if status == "budget":
        head += " [budget spent before the stated precision]"
    if status == "noise_limited":
        head += " [wider than the precision: loads inside it measured neither pass nor fail]"
    return head + tail


# ----------------------------------------------------------------------------------- over-saturation


@dataclass
class OverloadGuard:
    """Trips when the backlog (offered minus finished requests) and the recent TTFT both rose
    through the last `guard_s` seconds: the load exceeds what the server finishes, without bound.

    `add(t, backlog, ttft)` once a tick; `tripped` says whether the last `guard_s` of samples rise
    (each quarter of the window above the one before, and the backlog by at least `min_growth`)."""

    guard_s: float = 20.0
    min_growth: float = 10.0  # requests: a backlog that grew by fewer is no trend
    samples: list[tuple[float, float, float | None]] = field(default_factory=list)

    def reset(self) -> None:
        self.samples.clear()

    def add(self, t: float, backlog: float, ttft_s: float | None) -> None:
        self.samples.append((t, backlog, ttft_s))
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.guard_s:
            self.samples.pop(0)

    def tripped(self) -> bool:
        if self.guard_s <= 0 or len(self.samples) < 4:
            return False
        t0, t1 = self.samples[0][0], self.samples[-1][0]
        if t1 - t0 < self.guard_s * 0.95:
            return False
        quarters: list[list[tuple[float, float, float | None]]] = [[], [], [], []]
        for s in self.samples:
            quarters[min(3, int((s[0] - t0) / (t1 - t0) * 4))].append(s)
        if any(not q for q in quarters):
            return False
        backlog = [sum(s[1] for s in q) / len(q) for q in quarters]
        ttfts = [[s[2] for s in q if s[2] is not None] for q in quarters]
        if any(not q for q in ttfts):
            return False
        ttft = [sum(q) / len(q) for q in ttfts]
        rising = all(b > a for a, b in itertools.pairwise(backlog)) and all(
            b > a for a, b in itertools.pairwise(ttft)
        )
        return rising and backlog[-1] - backlog[0] >= self.min_growth

    def why(self) -> str:
        (t0, b0, l0), (t1, b1, l1) = self.samples[0], self.samples[-1]
        lat = "" if l0 is None or l1 is None else f", TTFT {l0 * 1000:.0f} -> {l1 * 1000:.0f} ms"
        return (
            f"over-saturated: requests waiting grew {b0:.0f} -> {b1:.0f} over {t1 - t0:.0f} s{lat}; "
            "the server does not keep up with this load"
        )


@dataclass
class Completions:
    """Requests finished per second, from each worker's cumulative count at each of its reports.

    A worker's report carries what finished since its last one, so between two of its reports the
    count is exact; counting per worker from its first report after `since` to its last avoids the
    error of cutting a report interval in two (3 s of one worker's completions at each end)."""

    reports: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # worker -> [(t, cumulative)]

    def add(self, worker: str, t: float, finished: int) -> None:
        """`finished` requests in this report (a delta)."""
        series = self.reports.setdefault(worker, [])
        series.append((t, (series[-1][1] if series else 0) + finished))

    def set_total(self, worker: str, t: float, cumulative: int) -> None:
        """A local runner: its cumulative count, read every tick."""
        self.reports.setdefault(worker, []).append((t, cumulative))

    def _active(self, since: float, need: int) -> list[list[tuple[float, int]]] | None:
        """Each reporting worker's reports after `since`; None until every one has `need` of them.
        A worker silent for STALE_S while others report (gone) is left out."""
        newest = max((series[-1][0] for series in self.reports.values() if series), default=None)
        if newest is None:
            return None
        out = []
        for series in self.reports.values():
            if not series or series[-1][0] < newest - STALE_S:
                continue
            after = [(t, n) for t, n in series if t >= since]
            if len(after) < need or after[-1][0] <= after[0][0]:
                return None
            out.append(after)
        return out or None

    def rate(self, since: float) -> float | None:
        """Completions per second after `since`, summed over workers; None until each has reported twice."""
        active = self._active(since, 2)
        if active is None:
            return None
        return sum((after[-1][1] - after[0][1]) / (after[-1][0] - after[0][0]) for after in active)

    def rate_halfwidth(self, since: float, z: float = Z_95) -> float | None:
        """The ~95% half-width of `rate(since)`: each worker's report-to-report rates as a sample
        (standard error of their mean), added over workers. None before three reports a worker."""
        active = self._active(since, 3)
        if active is None:
            return None
        var = 0.0
        for after in active:
            rates = [(n1 - n0) / (t1 - t0) for (t0, n0), (t1, n1) in itertools.pairwise(after) if t1 > t0]
            mean = sum(rates) / len(rates)
            var += sum((r - mean) ** 2 for r in rates) / max(1, len(rates) - 1) / len(rates)
        return z * math.sqrt(var)
