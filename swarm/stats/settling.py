"""When a stage's measurement window may open: `Settling`.

The requests sent under the new load have turned over once (the previous stage's backlog
drained) and their mean TTFT no longer moves between consecutive sub-windows; at the latest
after `SETTLE_MAX_S` (then the stage is unsettled and its figures are no verdict). Pure: the
load shape (swarm/live/shape.py) and the search (swarm/live/search.py) feed it counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Settling (the window of a stage opens once the load it changed to has reached steady state)
SETTLE_WINDOW_S = 3.0  # a sub-window: about one report of every worker (Locust reports every 3 s)
SETTLE_TOL = 0.15  # two consecutive sub-windows' mean TTFT this close: no trend (steady windows differ ~10%)
SETTLE_MIN_N = 20  # answered requests a sub-window needs before its mean is compared
SETTLE_MAX_S = 30.0  # the longest a stage may wait to settle; then its window opens unsettled
SETTLE_FLOW_TOL = (
    0.10  # open loop: finished/s within this of the offered rate (no backlog growing or draining)
)


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
