"""The LLM tab's charts: the master's live numbers over time, served as JSON at `/llm/series`.

Every `SAMPLE_S` the master's tick calls `LiveSeries.sample`: for Total, each workload and each
workload's request classes, one point of
- TTFT, TPOT, ITL and E2E percentiles over the worker deltas that arrived in the last `WINDOW_S`
  (a sliding window, so a point is "recent requests", not the run so far);
- requests/s and output tokens/s (the master's `current_rates`, the same 10 s window as the table);
- goodput (requests/s meeting --goodput) when the cells carry it (`Cell.goodput_met`);
and, run-wide, the requests in flight (the sum of each worker's last reported count) and users.
Stage changes (sweep stages, open-loop rates, search probes: every entry of the stage timeline)
are markers. The page (webui/src, built into swarm/live/webui/bundle) polls the JSON.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from swarm.core.units import stage_name
from swarm.stats.aggregate import Aggregate, Cell, ReportRead
from swarm.stats.quantiles import PERCENTILES
from swarm.stats.sliding import SlidingWindow

SAMPLE_S = 2.0
WINDOW_S = 10.0
MAX_POINTS = 1800  # one hour at SAMPLE_S; older points are dropped
LATENCIES = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("itl", "p99"),
    ("e2e", "p50"),
    ("e2e", "p99"),
)
TOTAL = "Total"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(cell: Cell, latency: str, stat: str) -> float | None:
    v = cell.latencies[latency].quantile(PERCENTILES[stat])
    return None if v is None or math.isnan(v) else round(v * 1000, 2)


def point(cell: Cell | None, rates: tuple[float, float], window_s: float) -> dict[str, float | None]:
    """One key's numbers at one sample. `cell`: the window's merged cells (None: no request finished);
    `window_s`: the seconds they span (goodput = good requests / window_s)."""
    out: dict[str, float | None] = {f"{lat}_{stat}_ms": None for lat, stat in LATENCIES}
    if cell is not None and cell.requests:
        out.update({f"{lat}_{stat}_ms": _ms(cell, lat, stat) for lat, stat in LATENCIES})
    out["qps"], out["output_tok_s"] = round(rates[0], 3), round(rates[1], 2)
    met = getattr(cell, "goodput_met", None) if cell is not None else None
    counted = getattr(cell, "goodput_counted", 0) if cell is not None else 0
    out["goodput"] = round(met / window_s, 3) if met is not None and counted else None
    return out


def keys_of(agg: Aggregate) -> list[tuple[str, dict[str, str]]]:
    """(series key, `Aggregate.combined` filter): Total, each workload, its classes when several."""
    out: list[tuple[str, dict[str, str]]] = [(TOTAL, {})]
    for w in agg.workloads():
        out.append((w, {"workload": w}))
        classes = agg.classes(w)
        if len(classes) > 1:
            out.extend((f"{w} / {k}", {"workload": w, "klass": k}) for k in classes)
    return out


def rate_key(key: str) -> str:
    """The `current_rates` key of a series key (Total -> total, "w / k" -> "w/k")."""
    return "total" if key == TOTAL else key.replace(" / ", "/")


class LiveSeries:
    """Worker reports in a sliding window (swarm/stats/sliding.py: each merged once, into its
    arrival second's slot), sampled into points; bounded memory."""

    def __init__(self) -> None:
        self._window = SlidingWindow(WINDOW_S)
        self.time: deque[str] = deque(maxlen=MAX_POINTS)
        self.in_flight: deque[int | None] = deque(maxlen=MAX_POINTS)
        self.users: deque[int] = deque(maxlen=MAX_POINTS)
        self.series: dict[str, dict[str, deque[float | None]]] = {}
        self._last_sample = 0.0
        self._first_add: float | None = None  # a window is shorter than WINDOW_S at the start

    def add(self, report: ReportRead, now: float | None = None) -> None:
        """One worker report (`Aggregate.read_wire`), arrived `now` (time.time())."""
        now = time.time() if now is None else now
        if self._first_add is None:
            self._first_add = now
        self._window.add(now, report)

    def clear(self) -> None:
        self.__init__()

    def due(self, now: float) -> bool:
        return now - self._last_sample >= SAMPLE_S - 1e-6

    def sample(
        self,
        now: float,
        rates: Mapping[str, tuple[float, float]],
        in_flight: int | None,
        users: int,
    ) -> None:
        self._last_sample = now
        window = self._window.window(now, WINDOW_S)
        span = min(WINDOW_S, max(SAMPLE_S, now - (self._first_add or now)))
        n = len(self.time)
        self.time.append(iso(now))
        self.in_flight.append(in_flight)
        self.users.append(users)
        filters = dict(keys_of(window))
        for key in sorted(filters.keys() | self.series.keys(), key=lambda k: (k != TOTAL, k)):
            f = filters.get(key)
            cell = window.combined(**f) if f is not None else None
            p = point(cell, rates.get(rate_key(key), (0.0, 0.0)), span)
            cols = self.series.get(key)
            if cols is None:  # a key seen first now: its earlier points are gaps
                cols = self.series[key] = {m: deque([None] * n, maxlen=MAX_POINTS) for m in p}
            for m, v in p.items():
                cols[m].append(v)

    def to_json(self, markers: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """{"time": [ISO], "in_flight", "users", "series": {key: {metric: [..]}}, "markers"}: the
        page's charts take [time, value] pairs; None is a gap."""
        return {
            "time": list(self.time),
            "in_flight": list(self.in_flight),
            "users": list(self.users),
            "series": {k: {m: list(v) for m, v in cols.items()} for k, cols in self.series.items()},
            "markers": list(markers),
            "sample_s": SAMPLE_S,
            "window_s": WINDOW_S,
        }


def stage_markers(timeline: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One marker per stage start after the first, named as every label names it (index 1: "stage 2:
    8 users" / "stage 2: 5 req/s")."""
    out = []
    for s in timeline:
        if not s.get("index"):
            continue
        what = f"{s['rate']:g} req/s" if s.get("rate") is not None else f"{s.get('users')} users"
        out.append({"time": iso(float(s["start_wall_s"])), "label": f"{stage_name(s['index'])}: {what}"})
    return out
