"""Open loop's arrival slots, handed to free users in order, and sent on time even mid read burst.

The event loop runs every socket one poll found readable before it looks at its timers again. When
a server writes a decode step's tokens to thousands of streams at once, the worker reads them one
after another (~70 µs each), and a user sleeping until its arrival slot wakes only after the whole
batch: at 5,000 open-loop streams that made requests leave up to ~180 ms late, and a lock's
hand-off to the next free user cost another turn of the loop per request
(docs/performance.md, issue 40).

`SlotQueue` keeps the free users of an open loop in a line: the one at its head sleeps until its
slot (`due`, a `time.perf_counter()` value), the others wait for their turn and take the next slot
when they reach the head, so a rate change never finds users parked on old slots. Every stream's
read compares the time now with `due` (a clock read, an attribute and a float compare: `SLOTS.due`
is `inf` when nothing waits, as in a closed loop; not the read's own time, which the kernel stamped
when the bytes came, long before when they waited behind a batch) and, when the slot has come,
`send_due` switches straight to the head's user so that it sends now; the reader resumes on the
loop's next turn, its chunk already timed by its read. Between reads (no stream in flight, or
between two decode steps) the head's timer wakes it, as `gevent.sleep` would.

Measured (`benchmarks/streams_10k.py --open-loop --streams 5000`, docs/performance.md): with the lock
and `gevent.sleep`, send lag p99 134 ms; with the line and the reads' hand-off, requests woken by
a read left 0.1 ms late at the median, and the lag outside the collector's full clean-up was p99
16 ms, max 29 ms (the young collections' pauses).

The same check runs one chore on time while a user waits (`set_chore`: the worker's young-generation
collection every 20 ms, swarm/live/gc_tuning.py): its own timer cannot fire mid-batch either, and a
collection that waited out a 100 ms read burst scans all that the burst left alive (pauses p99
14 ms, max 29 ms), a send due meanwhile waiting as long. With nobody waiting (a closed loop, or an
open loop at its in-flight cap) `due` is inf, the reads skip the clock, and the collector keeps to
its timer: nothing is scheduled for a pause to delay.

One `SlotQueue` per process (`SLOTS`): one event loop, one line of free users.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from gevent import get_hub, getcurrent


class SlotQueue:
    """Free users waiting for their arrival slots, in order; the head sleeps until `due`."""

    __slots__ = (
        "_chore",
        "_chore_at",
        "_chore_every",
        "_head",
        "_head_at",
        "_head_next",
        "_line",
        "_timer",
        "due",
    )

    def __init__(self) -> None:
        # while a user waits for its slot: the earlier of that slot and the chore's turn
        # (perf_counter); else inf, and the reads do not look at the clock (a closed loop's)
        self.due = math.inf
        self._head: Any = None  # the greenlet sleeping until its slot
        self._head_at = math.inf  # ... its slot (inf: nobody waits for one)
        self._head_next: Callable[[], float] | None = None  # ... and where it took it from
        self._timer: Any = None  # ... and its timer
        self._line: deque[tuple[Any, Callable[[], float]]] = deque()  # the others, in order
        self._chore: Callable[[], None] | None = None
        self._chore_every = math.inf
        self._chore_at = math.inf

    def set_chore(self, chore: Callable[[], None] | None, every_s: float = math.inf) -> None:
        """Run `chore` from a read once `every_s` passed since it last ran (it says so through
        `chore_done`); None: no chore."""
        self._chore, self._chore_every = chore, every_s
        self.chore_done()

    def chore_done(self) -> None:
        """The chore ran (from a read, or its own timer): its next turn is `every_s` from now."""
        self._chore_at = time.perf_counter() + self._chore_every if self._chore is not None else math.inf
        self._set_due()

    def _set_due(self) -> None:
        self.due = min(self._head_at, self._chore_at) if self._head is not None else math.inf

    def __len__(self) -> int:
        """Users waiting (the head included)."""
        return len(self._line) + (self._head is not None)

    def wait_for_slot(self, next_slot: Callable[[], float]) -> float:
        """Block this greenlet until its arrival slot and return the slot. `next_slot` gives the
        slot when this user reaches the head (the schedule is read then, not when it joined)."""
        me = getcurrent()
        if self._head is None and not self._line:
            slot = next_slot()
            if slot <= time.perf_counter():
                return slot  # late already: no wait, no turn of the loop
            self._make_head(me, slot, next_slot)
        else:
            self._line.append((me, next_slot))
        try:
            slot = get_hub().switch()  # resumed with its slot by `_fire` or `send_due`
        except BaseException:  # killed (a stop, fewer users) while waiting: its turn passes on
            if self._head is me:
                self._pop_head()
            else:
                try:
                    self._line.remove((me, next_slot))
                except ValueError:
                    pass
            raise
        return slot

    def send_due(self) -> None:
        """Called by a reading greenlet once `due` has come: the chore runs if its turn came, and
        if the head's slot did, its user sends now and the caller resumes on the loop's next turn
        (or raises what a stop or a deadline throws in meanwhile)."""
        now = time.perf_counter()
        if now >= self._chore_at and self._chore is not None:
            self._chore()  # (it calls chore_done)
        if self._head is None or now < self._head_at:
            return
        me = getcurrent()
        hub = get_hub()
        if me is hub:
            return
        head, slot = self._pop_head()
        resume = hub.loop.run_callback(me.switch)
        try:
            head.switch(slot)
        except BaseException:  # thrown in while the head ran (a kill, a deadline): no resumption left
            resume.stop()
            raise

    def reschedule(self) -> None:
        """The schedule changed (a new stage, a new share of the rate): the head takes its slot
        from the new one. The slot it held was the old schedule's, up to one old gap ahead (a
        second at 1 req/s): waiting it out would hold the new stage's first requests back as long,
        and send one request on the old schedule's time inside the new stage (held to the
        simulator's trace in tests/integration/test_sweep.py)."""
        head, next_slot = self._head, self._head_next
        if head is None or next_slot is None:
            return
        self._timer.close()
        self._make_head(head, next_slot(), next_slot)

    def _make_head(self, g: Any, slot: float, next_slot: Callable[[], float]) -> None:
        self._head = g
        self._head_at = slot
        self._head_next = next_slot
        self._set_due()
        timer = self._timer = get_hub().loop.timer(max(0.0, slot - time.perf_counter()))
        timer.start(self._fire)

    def _pop_head(self) -> tuple[Any, float]:
        """The head leaves the line (woken, or killed); the next user in line becomes it."""
        head, slot = self._head, self._head_at
        self._timer.close()
        self._head, self._timer, self._head_at, self.due = None, None, math.inf, math.inf
        self._head_next = None
        while self._line:
            g, next_slot = self._line.popleft()
            if g.dead:
                continue
            self._make_head(g, next_slot(), next_slot)
            break
        return head, slot

    def _fire(self) -> None:
        """The head's timer (in the hub): no read found it due first."""
        if self._head is not None:
            head, slot = self._pop_head()
            head.switch(slot)


SLOTS = SlotQueue()
