"""Python's cyclic garbage collector in a process that holds thousands of open streams.

A worker with 5,000 streams open holds about 650,000 GC-tracked objects. CPython 3.11 runs a full
collection whenever the objects promoted to its oldest generation reach a quarter of those already
there; with streams starting and ending all the time that is every 5-7 s, and each one takes
0.3-0.6 s on these machines with the event loop stopped, so the requests due meanwhile leave late.
The streams' objects die by reference counting (those full collections collected 0 objects), so
on the processes that send requests full collections are made rare: the oldest generation waits
for FULL_EVERY young (generation 1) collections instead of 10 (`relax_full_collections`). The
master too: at 1,000 workers (benchmarks/master_scale.py) its heap of 500 MiB took a full
collection every ~2 s, 280 ms each, 23% of its CPU (a `gc.callbacks` probe); its young
generations stay as CPython keeps them (no `YoungCollector`: it sends no requests on a schedule).

That left young collections of 30-60k objects, 20-80 ms each: CPython counts the death of an old
object against the young generation's allocation count, so with old streams ending it grows far
past its threshold of 700 before a collection runs. `YoungCollector` keeps it small instead: every
YOUNG_EVERY_S it collects the young generation (what was allocated since: a millisecond's work)
and freezes what survived (`gc.freeze()`: moved where no collection scans it again; objects frozen
still die by reference counting, as the streams' do). What freezing keeps from the collector is
cyclic garbage among frozen objects, so it is bounded: every CHECK_EVERY_S the memory blocks the
interpreter holds are counted (`sys.getallocatedblocks()`, under a millisecond; the frozen count,
`gc.get_freeze_count()`, walks the frozen list: 100-175 ms at 5,000 streams, as long as the pauses
this removes), and once they have grown past what the requests now in flight explain (the blocks
after the last clean-up, plus BLOCKS_PER_STREAM for each request in flight beyond those then) by
more than REFREEZE_GROWTH of it (and by REFREEZE_MIN blocks), everything is unfrozen, collected in
full and frozen again. A clean-up stops the loop for as long as a full collection takes (0.5 s at
5,000 streams): counted against the blocks alone, an open loop filling to 5,000 streams made one
well after its fill, 514 ms with every request due meanwhile late; the streams explain that growth,
so it is not a clean-up's cue. (A clean-up at each test's stop, for the users torn down, was taken out before it landed:
the run in which it was on lost 4 of 34 records from a `--stop-timeout 0` stop's summary, a race
not yet explained; the stop path is left as it was.)

`benchmarks/streams_10k.py --open-loop --streams 5000` (docs/performance.md has the table and the
commit): see the send lag, GC pauses and CPU per chunk there, before and after.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent

from swarm.client.on_time import SLOTS

FULL_EVERY = 1000
YOUNG_EVERY_S = 0.02  # how often the young generation is collected and its survivors frozen
CHECK_EVERY_S = 1.0  # how often the interpreter's allocated blocks are counted
REFREEZE_GROWTH = 0.5  # blocks grown by this share since the last clean-up: clean up
REFREEZE_MIN = 300_000  # ... and by at least this many (a small heap grows by shares fast)
# the growth one more request in flight explains (measured: ~110 with 12-token answers)
BLOCKS_PER_STREAM = 300

log = logging.getLogger(__name__)


def relax_full_collections() -> None:
    """Full collections at most every FULL_EVERY young ones (a higher threshold already set is kept)."""
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, FULL_EVERY))


class YoungCollector:
    """The young generation collected and its survivors frozen every `every_s`, in a greenlet of
    the process's event loop; `clean_up()` unfreezes, collects in full and freezes again."""

    def __init__(
        self,
        every_s: float = YOUNG_EVERY_S,
        check_s: float = CHECK_EVERY_S,
        streams: Callable[[], int] = lambda: 0,
    ) -> None:
        self.every_s, self.check_s = every_s, check_s
        self.streams = streams  # the process's requests in flight now
        self.cleanups = 0
        self.baseline = 0  # the interpreter's allocated blocks after the last clean-up
        self.baseline_streams = 0  # ... and the requests in flight then
        self._greenlet: Any = None

    def start(self) -> None:
        if self._greenlet is None:
            self.clean_up()
            self._greenlet = gevent.spawn(self._forever)
            SLOTS.set_chore(self.young, self.every_s)  # mid read burst too (swarm/client/on_time.py)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
            SLOTS.set_chore(None)
        gc.unfreeze()

    def young(self) -> None:
        gc.collect(0)
        gc.freeze()
        SLOTS.chore_done()

    def needs_clean_up(self, blocks: int, streams: int = 0) -> bool:
        """Whether `blocks` (with `streams` requests in flight) grew past what the streams explain."""
        explained = self.baseline + BLOCKS_PER_STREAM * max(0, streams - self.baseline_streams)
        grown = blocks - explained
        return grown > REFREEZE_MIN and grown > REFREEZE_GROWTH * explained

    def clean_up(self) -> int:
        """Unfreeze, collect every generation, freeze again: the cyclic garbage frozen since the
        last clean-up is freed. Returns the objects collected."""
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self.baseline = sys.getallocatedblocks()
        self.baseline_streams = self.streams()
        self.cleanups += 1
        return found

    def _forever(self) -> None:
        next_check = time.monotonic() + self.check_s
        while True:
            gevent.sleep(self.every_s)
            self.young()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + self.check_s
                if self.needs_clean_up(sys.getallocatedblocks(), self.streams()):
                    t0 = time.perf_counter()
                    found = self.clean_up()
                    log.debug(
                        "gc clean-up: %d collected in %.0f ms", found, (time.perf_counter() - t0) * 1000
                    )


COLLECTOR = YoungCollector()


def keep_young_collections_small(streams: Callable[[], int]) -> None:
    """Start the process's `YoungCollector` (once; `relax_full_collections` too); `streams`: the
    process's requests in flight now."""
    relax_full_collections()
    COLLECTOR.streams = streams
    COLLECTOR.start()
