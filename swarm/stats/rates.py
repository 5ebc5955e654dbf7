"""The web UI's "current" rates: requests/s and output tokens/s over a sliding window (pure).

Every tick the master adds the aggregate's running counts (`counts`: per workload, workload/class,
model, endpoint and total, and the good requests of each under `good:KEY`); `RateWindow.rates` is the
difference between the oldest count still inside the window and the newest, over their time apart.
"""

from __future__ import annotations

from collections import deque

from swarm.stats.aggregate import Aggregate

RATE_WINDOW_S = 10.0  # web UI "current" QPS and tok/s

Counts = dict[str, tuple[int, int]]  # key -> (requests, output tokens); `good:KEY` -> (good requests, 0)


def counts(agg: Aggregate) -> Counts:
    """The running totals the rates are differences of."""
    out: Counts = {}
    for cell in agg:
        keys = (
            cell.workload,
            f"{cell.workload}/{cell.klass}",
            f"model:{cell.model}",
            f"endpoint:{cell.endpoint}",
        )
        for key in (*keys, "total"):
            r, t = out.get(key, (0, 0))
            out[key] = (r + cell.requests, t + cell.output_tokens)
            g, _ = out.get(f"good:{key}", (0, 0))  # --goodput: good requests (the LLM tab's req/s)
            out[f"good:{key}"] = (g + cell.goodput_met, 0)
    return out


class RateWindow:
    """The counts of the last `window_s` seconds (and the one just before, to span the window)."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._history: deque[tuple[float, Counts]] = deque()

    def add(self, now: float, current: Counts) -> None:
        self._history.append((now, current))
        while len(self._history) > 2 and self._history[1][0] <= now - self.window_s:
            self._history.popleft()

    def rates(self) -> dict[str, tuple[float, float]]:
        """key -> (requests/s, output tokens/s) over the window ({} before two samples)."""
        if len(self._history) < 2:
            return {}
        (t0, c0), (t1, c1) = self._history[0], self._history[-1]
        dt = t1 - t0
        if dt <= 0:
            return {}
        return {
            k: ((r - c0.get(k, (0, 0))[0]) / dt, (t - c0.get(k, (0, 0))[1]) / dt) for k, (r, t) in c1.items()
        }
