"""The trace replay's schedule, apart from Locust's wiring (that is swarm/live/replay.py): the
master's `Dispatcher` (leases, re-assignment from lost workers, per-worker lag), a worker's
`ReplayQueue` of leased rows, and `Replay`, this process's side of it, held on the process's
state (swarm/live/state.py `SwarmState.replay`). It imports no other module of live/, so the
state can name these types without an import cycle.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
from locust.runners import STATE_MISSING

from swarm.load.trace import Trace, TraceRow, implied_hit_rate
from swarm.load.trace_prompts import TracePrompts

log = logging.getLogger(__name__)

LEASE = "swarm_trace_lease"  # master -> worker: {"rows": [TraceRow.to_wire + due wall time]}
REVOKE = "swarm_trace_revoke"  # master -> worker: drop the rows you hold (you were given up)
CLAIM = "swarm_trace_claim"  # worker -> master: {"row", "lag"}, just before the request is sent
DONE = "swarm_trace_done"  # worker -> master: {"row"}, after its record
READY = "swarm_trace_ready"  # worker -> master: its prompts are built, it takes rows
LEAD_S = 1.0  # the replay's clock starts this long after every worker is ready: the first leases get there
READY_REPEAT_S = 1.0  # a worker says READY this often until its first lease
READY_WAIT_S = 120.0  # ... or after this long, with the workers that are ready by then
LEASE_AHEAD_S = 2.0  # rows are leased this long before they are due
TICK_S = 0.1
STALL_S = 1.0  # a worker with rows this overdue and no claim for as long gets no new rows


# ---- worker side -----------------------------------------------------------------------------


@dataclass(order=True)
class _Due:
    due_wall: float
    row: TraceRow = field(compare=False)


class ReplayQueue:
    """A worker's leased rows, handed to its users in send order."""

    def __init__(self) -> None:
        self._heap: list[_Due] = []
        self._ready = gevent.event.Event()
        self.generation = 0  # bumped by a revoke: a row taken before it is not sent

    def add(self, rows: list[tuple[float, TraceRow]]) -> None:
        for due, row in rows:
            heapq.heappush(self._heap, _Due(due, row))
        if self._heap:
            self._ready.set()

    def revoke(self) -> int:
        n = len(self._heap)
        self._heap = []
        self._ready.clear()
        self.generation += 1
        return n

    def wait(self, timeout: float) -> bool:
        """Until a row is queued (False after `timeout`)."""
        if not self._heap:
            self._ready.clear()
            self._ready.wait(timeout)
        return bool(self._heap)

    def take(self) -> _Due | None:
        return heapq.heappop(self._heap) if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)


@dataclass
class Replay:
    """This process's side of the replay: the dispatcher (master, local) and/or the queue (worker,
    local) with the prompts."""

    dispatcher: Dispatcher | None = None
    queue: ReplayQueue | None = None
    prompts: TracePrompts | None = None
    send_claim: Any = None  # (row, lag) -> None
    send_done: Any = None  # (row) -> None
    leased: bool = False  # a lease came in (a worker says READY until then)
    announce: Any = None  # () -> None: READY to the master (worker)
    last_ready: float = 0.0


# ---- master side -----------------------------------------------------------------------------


@dataclass
class WorkerLag:
    sent: int = 0
    late: int = 0  # rows sent more than --trace-max-lag behind
    max_lag_s: float = 0.0
    last_claim: float = 0.0


class Dispatcher:
    """The master's schedule: leases rows to live workers, takes back a dead worker's."""

    def __init__(self, runner: Any, trace: Trace, max_lag_s: float, *, local: bool = False) -> None:
        self.runner = runner
        self.trace = trace
        self.max_lag_s = max_lag_s
        self.local = local
        self.send = self._send_lease
        self.t0: float | None = None  # wall time of the replay's time 0 (set once the workers are ready)
        self.started_at: float | None = None
        self.ready: set[str] = set()  # workers whose prompts are built
        self._next = 0  # next row of trace.rows not yet leased
        self._pending: deque[TraceRow] = deque()  # taken back from a lost worker, to lease again
        self.leased: dict[str, dict[int, tuple[float, TraceRow]]] = {}  # worker -> row -> (due, row)
        self.claimed: dict[int, str] = {}  # row -> the worker that sent it
        self.done: set[int] = set()
        self.inflight: Counter[str] = Counter()
        self.lost: set[str] = set()  # workers given up (missing): their rows went to others
        self.reassigned: Counter[str] = Counter()  # lost worker -> rows taken from it
        self._moved: set[int] = set()  # rows re-assigned: late by the loss, not by the worker that sends them
        self.moved_max_lag_s = 0.0
        self.duplicates = 0  # claims of a row already claimed (a lost worker that came back)
        self.lag: dict[str, WorkerLag] = {}
        self._greenlet: Any = None
        self.end_s: float | None = None

    # -- life --------------------------------------------------------------------------------
    def start(self) -> None:
        if self._greenlet is not None:
            return
        self.started_at = time.time()
        self._greenlet = gevent.spawn(self._loop)

    def _start_clock(self, now: float) -> bool:
        """Time 0 of the replay: once every connected worker has built its prompts (READY_WAIT_S at
        most, then with those ready)."""
        if self.t0 is not None:
            return True
        assert self.started_at is not None
        connected = set(self.workers(ready_only=False))
        ready = connected & self.ready
        if not ready or (ready != connected and now - self.started_at < READY_WAIT_S):
            return False
        self.t0 = now + LEAD_S
        log.info(
            "swarm: trace replay of %s (%s): %d rows over %.1f s (time scale %g), %d workers",
            self.trace.path,
            self.trace.format,
            len(self.trace.rows),
            self.trace.span_s,
            self.trace.time_scale,
            len(ready),
        )
        return True

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)

    @property
    def finished(self) -> bool:
        """Every row leased and sent, and every request sent finished (or its worker was lost)."""
        if self._next < len(self.trace.rows) or self._pending or any(self.leased.values()):
            return False
        return all(r in self.done or w in self.lost for r, w in self.claimed.items())

    def _loop(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # the schedule must never take the run down
                log.exception("swarm: trace replay bookkeeping failed")
            if self.finished:
                self.end_s = time.time()
                return
            gevent.sleep(TICK_S)

    # -- workers -----------------------------------------------------------------------------
    def workers(self, ready_only: bool = True) -> list[str]:
        """Workers that take rows: connected ones whose prompts are built (the local runner: itself)."""
        if self.local:
            return ["local"] if "local" in self.ready or not ready_only else []
        return [
            c.id
            for c in self.runner.clients.values()
            if c.state != STATE_MISSING and c.id not in self.lost and (c.id in self.ready or not ready_only)
        ]

    def _missing(self) -> set[str]:
        if self.local:
            return set()
        clients = self.runner.clients
        gone = {w for w in self.leased if w not in clients}  # quit
        return gone | {c.id for c in clients.values() if c.state == STATE_MISSING}

    def _stalled(self, worker: str, now: float) -> bool:
        rows = self.leased.get(worker)
        if not rows:
            return False
        oldest = min(due for due, _ in rows.values())
        last = self.lag.get(worker, WorkerLag()).last_claim
        return now - oldest > STALL_S and now - last > STALL_S

    def _send_lease(self, worker: str, rows: list[tuple[float, TraceRow]]) -> None:
        self.runner.send_message(LEASE, {"rows": [[due, *r.to_wire()] for due, r in rows]}, client_id=worker)

    def _healed(self) -> set[str]:
        """Lost workers that Locust sees again (heartbeats back: 'self-healed'), prompts built."""
        if self.local or not self.lost:
            return set()
        return {
            c.id
            for c in self.runner.clients.values()
            if c.id in self.lost and c.state != STATE_MISSING and c.id in self.ready
        }

    def tick(self) -> None:
        now = time.time()
        for w in self._missing() - self.lost:
            self._take_back(w)
        for w in self._healed():  # its queue was revoked when it was lost: it starts afresh
            self.lost.discard(w)
            log.warning("swarm: trace replay: worker %s is back; it takes rows again", w)
        if not self._start_clock(now):
            return
        assert self.t0 is not None
        workers = [w for w in self.workers() if not self._stalled(w, now)] or self.workers()
        if not workers:
            return
        batch: list[TraceRow] = list(self._pending)
        self._pending.clear()
        rows = self.trace.rows
        horizon = now + LEASE_AHEAD_S - self.t0
        while self._next < len(rows) and rows[self._next].at_s <= horizon:
            batch.append(rows[self._next])
            self._next += 1
        if not batch:
            return
        out: dict[str, list[tuple[float, TraceRow]]] = {}
        load = {w: len(self.leased.get(w, ())) + self.inflight[w] for w in workers}
        for row in batch:
            w = min(workers, key=lambda k: load[k])
            load[w] += 1
            item = (self.t0 + row.at_s, row)
            self.leased.setdefault(w, {})[row.row] = item
            out.setdefault(w, []).append(item)
        for w, items in out.items():
            self.send(w, items)

    def _take_back(self, worker: str) -> None:
        self.lost.add(worker)
        rows = self.leased.pop(worker, {})
        if rows:
            self.reassigned[worker] += len(rows)
            self._moved.update(rows)
            self._pending.extend(sorted((r for _, r in rows.values()), key=lambda r: r.at_s))
        sent = sum(1 for w in self.claimed.values() if w == worker)
        log.warning(
            "swarm: trace replay: worker %s is lost; its %d unsent rows go to the other workers (it sent %d)",
            worker,
            len(rows),
            sent,
        )
        if not self.local and worker in self.runner.clients:
            self.runner.send_message(REVOKE, None, client_id=worker)  # in case it comes back

    # -- messages in -------------------------------------------------------------------------
    def on_claim(self, worker: str, row: int, lag: float) -> None:
        leased = self.leased.get(worker)
        if leased is not None:
            leased.pop(row, None)
        if row in self.claimed:
            self.duplicates += 1
            log.warning(
                "swarm: trace replay: row %d sent twice (by %s and %s)", row, self.claimed[row], worker
            )
            return
        self.claimed[row] = worker
        self.inflight[worker] += 1
        wl = self.lag.setdefault(worker, WorkerLag())
        wl.sent += 1
        wl.last_claim = time.time()
        if row in self._moved:
            self.moved_max_lag_s = max(self.moved_max_lag_s, lag)
        elif lag > self.max_lag_s:
            if not wl.late:
                log.warning(
                    "swarm: trace replay is behind: worker %s sent row %d %.3f s late (bound %.3f s); "
                    "raise -u or add workers",
                    worker,
                    row,
                    lag,
                    self.max_lag_s,
                )
            wl.late += 1
        if row not in self._moved:
            wl.max_lag_s = max(wl.max_lag_s, lag)

    def on_done(self, worker: str, row: int) -> None:
        self.done.add(row)
        if self.inflight[worker] > 0:
            self.inflight[worker] -= 1

    # -- out ---------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        t = self.trace
        behind = {w: wl for w, wl in self.lag.items() if wl.late}
        return {
            "file": t.path,
            "format": t.format,
            "rows": len(t.rows),
            "rows_in_file": t.rows_in_file,
            "time_scale": t.time_scale,
            "span_s": t.span_s,
            "t0_wall_s": self.t0,  # the wall time of the replay's time 0: row r is due at t0 + its time
            "block_size": t.block_size,
            "sent": len(self.claimed),
            "unsent": len(t.rows) - len(self.claimed),
            "duplicates": self.duplicates,
            "reassigned": sum(self.reassigned.values()),
            "reassigned_from": dict(self.reassigned),
            "reassigned_max_lag_s": self.moved_max_lag_s,  # their lateness: the time to notice the loss
            "implied_prefix_hit_rate": implied_hit_rate(t.rows, t.block_size),
            "max_lag_bound_s": self.max_lag_s,
            "behind": [
                {"worker": w, "late": wl.late, "sent": wl.sent, "max_lag_s": wl.max_lag_s}
                for w, wl in sorted(behind.items())
            ],
            "workers": {
                w: {"sent": wl.sent, "max_lag_s": wl.max_lag_s} for w, wl in sorted(self.lag.items())
            },
        }


__all__ = ["CLAIM", "DONE", "LEASE", "READY", "REVOKE", "Dispatcher", "Replay", "ReplayQueue", "WorkerLag"]
