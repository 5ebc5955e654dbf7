"""The search of `swarm run --search`: `Bracket`, its probes, the answer and its headline.

Concurrency/rate: the highest load meeting the criterion. Double from the start level until a
probe fails (halve until one passes), then probe inside the bracket where the worst objective's
ratio to its threshold, interpolated in log space between the bracket's ends, crosses 1, clamped
to the bracket's middle half (so each probe cuts at least a quarter of the bracket away: never
slower than 1.4x bisection, much faster where latency grows smoothly); done when the bracket is
narrower than the precision of its lower end. Loads probed inconclusive inside the bracket are
not probed again: the search narrows the gaps beside them, and when those are narrower than the
precision it ends `noise_limited` (the crossing lies within the measurement noise of those
loads). Knee: the lowest load whose QPS is within `KNEE_SHARE` of the plateau (the highest QPS
seen; every higher load counts as on it) whose TTFT p99 is also `KNEE_LATENCY` times its value
at half the load ("QPS stops growing while latency climbs"), found the same way after doubling
until QPS grows less than `KNEE_GROWTH`, by bisection.

Pure (no Locust, no clock): the master's search shape (swarm/live/search.py) feeds it each
stage's verdict (swarm/stats/stage_verdict.py); the unit tests feed it made-up curves.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from swarm.stats.search_spec import SearchSpec

KNEE_SHARE = 0.90  # the knee: QPS at this share of the plateau (the highest seen) or more: on the plateau (10%: twice a stage's QPS noise)
KNEE_LATENCY = 2.0  # ... and whose TTFT p99 is this many times its value at half the load
KNEE_SPAN = 4.0  # knee: a plateau this many times wide without a latency climb ends the search
KNEE_GROWTH = 0.20  # doubling the load raised QPS less than this: the plateau is in sight (elasticity 0.26)
MAX_CONCURRENCY = 4096
MAX_RATE = 10000.0


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
        plateau = self.plateau()
        if plateau <= 0:  # no QPS read yet: no plateau to start
            return None
        return min((p.load for p in self.probes if (p.qps or 0.0) >= KNEE_SHARE * plateau), default=None)

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
        """Knee: a doubling that raised QPS less than KNEE_GROWTH (the plateau is in sight). Only
        probes that read a QPS count: one without (its stage too short for two reports of each
        worker) says nothing of growth, neither a stall nor a rise."""
        read = [p for p in self.probes if p.qps is not None]
        return any(
            b.load >= 1.5 * a.load and (b.qps or 0.0) < (1 + KNEE_GROWTH) * (a.qps or 0.0)
            for a, b in itertools.permutations(read, 2)
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
