"""The over-saturation stop of every run: `OverloadGuard` trips when the backlog (requests
offered and not finished) and the recent TTFT both rise through `guard_s`. Pure: the stage meter
of swarm/live/search.py feeds it a sample a tick."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

CONVERGING = 0.25  # the backlog's last quarter rose by under this share of its first's: levelling off


@dataclass
class OverloadGuard:
    """Trips when the backlog (offered minus finished requests) and the recent TTFT both rose
    through the last `guard_s` seconds: the load exceeds what the server finishes, without bound.

    `add(t, backlog, ttft)` once a tick; `tripped` says whether the last `guard_s` of samples rise
    (each quarter of the window above the one before, and the backlog by at least `min_growth`)
    without levelling off: a backlog that settles (its last quarter's rise under CONVERGING of its
    first's) is the in-flight count reaching its level, not a load without bound. An open loop of
    5,000 slow streams (benchmarks/streams_10k.py) fills for half a minute, the streams lasting a
    little longer as the batch grows, and was stopped at 38 s: "5498 -> 5530 over 20 s"."""

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
        without_bound = backlog[3] - backlog[2] >= CONVERGING * (backlog[1] - backlog[0])
        return rising and without_bound and backlog[-1] - backlog[0] >= self.min_growth

    def why(self) -> str:
        (t0, b0, l0), (t1, b1, l1) = self.samples[0], self.samples[-1]
        lat = "" if l0 is None or l1 is None else f", TTFT {l0 * 1000:.0f} -> {l1 * 1000:.0f} ms"
        return (
            f"over-saturated: requests waiting grew {b0:.0f} -> {b1:.0f} over {t1 - t0:.0f} s{lat}; "
            "the server does not keep up with this load"
        )
