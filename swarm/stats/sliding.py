"""The workers' reports of the last seconds, for views over a sliding window.

The LLM tab's charts (swarm/live/series.py: the last 10 s at every point) and `--abort-on`
(swarm/stats/abort.py: each condition over its own window, judged at every tick) both read the
reports that arrived in a window ending now. Keeping every report and merging the window's anew at
each reading merged each report once per reading that saw it: at 1,000 workers (333 reports a
second) a 10 s window read every second is 3,330 merges a second, a core's worth. Here a report is
merged once, as it comes, into the aggregate of its arrival's `SLOT_S` slot; a window merges its
slots, those begun within it (so a window of W s holds W - 1 to W seconds of reports), and the
slots older than the longest window are dropped as new ones begin.
"""

from __future__ import annotations

import math
from collections import deque

from swarm.stats.aggregate import Aggregate, ReportRead

SLOT_S = 1.0


class SlidingWindow:
    """Reports merged per arrival slot, kept for `span_s` seconds."""

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self._slots: deque[tuple[float, Aggregate]] = deque()  # (slot start, its reports merged)

    def add(self, now: float, report: ReportRead) -> None:
        """One report (`Aggregate.read_wire`), arrived `now` (time.time())."""
        start = math.floor(now / SLOT_S) * SLOT_S
        slots = self._slots
        if not slots or slots[-1][0] != start:
            self._drop_before(now - self.span_s)
            slots.append((start, Aggregate()))
        slots[-1][1].merge_read(report)

    def window(self, now: float, window_s: float) -> Aggregate:
        """A fresh aggregate of the reports of the slots begun in the last `window_s` before `now`."""
        self._drop_before(now - self.span_s)
        out = Aggregate()
        for start, slot in self._slots:
            if start >= now - window_s:
                out.merge(slot)
        return out

    def starts(self) -> list[float]:
        """The slots kept, by their start."""
        return [start for start, _ in self._slots]

    def clear(self) -> None:
        self._slots.clear()

    def _drop_before(self, t: float) -> None:
        slots = self._slots
        while slots and slots[0][0] < t:
            slots.popleft()
