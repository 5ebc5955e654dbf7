"""Requests finished per second from each worker's reports: `Completions` (the stage meter
of swarm/live/search.py reads the server's throughput from it). Pure."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from swarm.stats.confidence import Z

STALE_S = 10.0  # a worker that has not reported for this long while others do is gone (Locust: every 3 s)


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

    def rate_halfwidth(self, since: float, z: float = Z) -> float | None:
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
