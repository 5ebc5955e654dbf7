"""`--abort-on`: the run's circuit breaker. Conditions over a sliding window of recent requests that,
when one holds, end the run with the reason.

Syntax: comma-separated conditions `[WORKLOAD.]METRIC OP VALUE[UNIT][/WINDOW]`, the `--slo` grammar
(swarm/stats/slo.py: same metrics, operators and units) with a window, e.g.
`error_rate>50%/10s,ttft_p99>20s/30s`. WINDOW is a duration (default DEFAULT_WINDOW_S, at least
MIN_WINDOW_S). Unlike an SLO, which says what must hold, a condition says when to stop: the run
ends as soon as one is true.

What a window holds: the master keeps each worker report's delta (swarm/stats/wire.py) with the
time it arrived; a condition over W seconds reads the deltas that arrived in the last W seconds
(requests finished then, give or take one report interval, 3 s in Locust). A condition is judged
only once the run has lasted W seconds (a start-up blip is not a failing target) and its value
exists; an error rate also needs MIN_REQUESTS requests that ran to an end in the window (one
failed request of one is not a rate).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.terminal import printable
from swarm.core.units import parse_duration, seconds_text
from swarm.stats import slo, summary
from swarm.stats.aggregate import Cell, ReportRead
from swarm.stats.sliding import SlidingWindow

DEFAULT_WINDOW_S = 10.0
MIN_WINDOW_S = 3.0  # Locust workers report every 3 s: a shorter window would hold one report or none
MIN_REQUESTS = 5  # an error rate is judged on at least this many requests that ran to an end
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}
FLAG = "--abort-on"


@dataclass(frozen=True)
class Condition:
    objective: slo.Objective
    window_s: float
    text: str  # as the user wrote it


@dataclass(frozen=True)
class Trip:
    """A condition that held: what summary.json's `aborted` says, and the one-line reason."""

    condition: Condition
    value: float
    requests: int  # requests that finished in the window
    failed: int
    top_error: str | None  # the most frequent failure in the window, "outcome: message"

    @property
    def reason(self) -> str:
        o = self.condition.objective
        name = _name(o)
        head = (
            f"aborted: {name} {value_text(o.metric, self.value)} {o.op} "
            f"{value_text(o.metric, o.threshold)} over the last {window_text(self.condition.window_s)}"
        )
        if o.metric == "error_rate":
            why = f": {self.top_error}" if self.top_error else ""
            return f"{head} ({self.failed:,} of {self.requests:,} requests failed{why})"
        return f"{head} ({self.requests:,} requests)"

    def entry(self, at_iso: str | None) -> dict[str, Any]:
        """summary.json's `aborted` block."""
        o = self.condition.objective
        return {
            "reason": self.reason,
            "condition": self.condition.text,
            "workload": o.workload,
            "metric": o.metric,
            "op": o.op,
            "threshold": o.threshold,
            "value": self.value,
            "window_s": self.condition.window_s,
            "requests": self.requests,
            "failed": self.failed,
            "top_error": self.top_error,
            "at": at_iso,
        }


def _name(o: slo.Objective) -> str:
    return o.metric if o.workload == "total" else f"{o.workload}.{o.metric}"


def value_text(metric: str, v: float) -> str:
    """A value as the reason prints it: 50%, 12.5%; latencies as the SLO lines print them."""
    return f"{v * 100:.4g}%" if metric == "error_rate" else slo.value_text(metric, v)


def window_text(s: float) -> str:
    return seconds_text(s, sep=" ", s_digits=0 if float(s).is_integer() else 1, switch_s=1.0)


def parse(text: str | None) -> list[Condition]:
    """Parse an `--abort-on` value. Raises UsageError naming the bad part."""
    if text is None or not str(text).strip():
        raise UsageError(f"empty {FLAG}: give at least one condition, e.g. error_rate>50%/10s")
    out = []
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        expr, sep, window = part.rpartition("/")
        if not sep:
            expr, window_s = part, DEFAULT_WINDOW_S
        else:
            try:
                window_s = parse_duration(window.strip())
            except UsageError:
                raise UsageError(
                    f"bad {FLAG} condition {part!r}: window {window.strip()!r} is not a duration, "
                    "e.g. error_rate>50%/10s"
                ) from None
        if not window_s >= MIN_WINDOW_S or window_s == float("inf"):
            raise UsageError(
                f"bad {FLAG} condition {part!r}: the window must be at least {MIN_WINDOW_S:g} s "
                "(workers report every 3 s), e.g. error_rate>50%/10s"
            )
        if not expr.strip():
            raise UsageError(f"bad {FLAG} condition {part!r}: expected METRIC OP VALUE[/WINDOW]")
        (objective,) = slo.parse(expr, what=f"{FLAG} condition", flag=FLAG)
        out.append(Condition(objective, window_s, part))
    if not out:
        raise UsageError(f"empty {FLAG}: give at least one condition, e.g. error_rate>50%/10s")
    return out


def top_error(cell: Cell) -> str | None:
    """The most frequent failure kept in `cell`: "outcome: message" (or the outcome alone); the
    message is the target's words, so its control characters are written out (printable)."""
    best: tuple[int, str] | None = None
    for outcome, msgs in cell.errors.items():
        for msg, n in msgs.items():
            if best is None or n > best[0]:
                best = (n, f"{outcome}: {msg}" if msg else outcome)
    return printable(best[1]) if best is not None else None


class Breaker:
    """The conditions and the reports of the longest window (swarm/stats/sliding.py); `check` says
    whether one holds now."""

    def __init__(self, conditions: list[Condition]) -> None:
        self.conditions = conditions
        self.span_s = max(c.window_s for c in conditions)
        self._reports = SlidingWindow(self.span_s)

    def add(self, t: float, report: ReportRead) -> None:
        """One report (`Aggregate.read_wire`), arrived at `t` (time.time())."""
        if report.cells or report.turns:
            self._reports.add(t, report)

    def clear(self) -> None:
        self._reports.clear()

    def check(self, now: float, started_s: float) -> Trip | None:
        """The first condition that holds over its window ending `now` (the reports of the slots
        begun in it), or None. `started_s`: when the run started (a window is judged only once the
        run is that long)."""
        for c in self.conditions:
            if now - started_s < c.window_s:
                continue
            window = self._reports.window(now, c.window_s)
            o = c.objective
            cell = window.combined(None if o.workload == "total" else o.workload)
            ended = cell.requests - cell.cancelled - cell.cancelled_by_client
            if o.metric == "error_rate" and ended < MIN_REQUESTS:
                continue
            value = o.measured({o.workload: summary.block(cell, c.window_s)})
            if value is not None and _OPS[o.op](value, o.threshold):
                return Trip(c, value, cell.requests, cell.failed, top_error(cell))
        return None


def describe(conditions: list[Condition]) -> str:
    """The conditions as the start-up log line names them."""
    return ", ".join(
        f"{_name(c.objective)} {c.objective.op} {value_text(c.objective.metric, c.objective.threshold)} "
        f"over {window_text(c.window_s)}"
        for c in conditions
    )
