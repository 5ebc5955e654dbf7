"""Between the engine and the client: the API server's front-end cost and the network's delay.

vLLM's engine core hands each step's outputs to its API server, a Python process that turns
them into SSE events one at a time; at high event rates that one process, not the GPU, is the
limit (more processes: `--api-server-count`). `swarm sim --frontend-cost D
--api-server-count K` models it: each request is served by one of K lanes (round-robin), and
a lane spends D per event it writes, one event after another. `--network-delay D` adds
a constant one-way delay to every write, in order, with no throughput limit.

Both are virtual clocks, never burnt CPU: when a write is produced its lane's busy-until time
is advanced by its events' cost and the write becomes due at that time plus the network delay; one task per
response writes what is due, in order, so the handler never waits on the delay. The engine's
clocks (its TTFT/ITL histograms, the trace's first_token_time) stay the engine's; the trace's
`first_write_time` is when the first bytes really went to the socket.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from swarm.sim.trace import TraceRecord


class FrontEnd:
    """K serial lanes, each busy `cost_s` per SSE event (virtual busy-until clocks, loop time)."""

    def __init__(self, lanes: int, cost_s: float) -> None:
        self.cost_s = cost_s
        self.busy_until = [0.0] * lanes
        self._turn = itertools.cycle(range(lanes))

    def lane(self) -> int:
        """The lane of a new request (round-robin)."""
        return next(self._turn)

    def reserve(self, lane: int, events: int, now: float) -> float:
        """Queue `events` on `lane` at `now`; returns when the lane has processed them."""
        done = max(now, self.busy_until[lane]) + events * self.cost_s
        self.busy_until[lane] = done
        return done


Before = Callable[[], None] | None  # called just before the bytes go out (the trace line of the last write)


class Delivery(Protocol):
    async def write(self, data: bytes, events: int, before: Before = None) -> None: ...

    async def flush(self) -> None: ...

    def close(self) -> None: ...


class DirectDelivery:
    """No front-end cost, no delay: each write goes to the socket at once."""

    def __init__(self, resp: web.StreamResponse, rec: TraceRecord) -> None:
        self.resp = resp
        self.rec = rec

    async def write(self, data: bytes, events: int, before: Before = None) -> None:
        if self.rec.first_write_time is None:
            self.rec.first_write_time = time.time()
        if before is not None:
            before()
        await self.resp.write(data)

    async def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


class DelayedDelivery:
    """Writes due later (front-end lane, network delay), written in order by one task.

    `write` only queues (it raises the writer's error, e.g. the client gone, on the next call);
    `flush` waits until everything queued has been written."""

    def __init__(
        self,
        resp: web.StreamResponse,
        rec: TraceRecord,
        frontend: FrontEnd | None,
        delay_s: float,
    ) -> None:
        self.resp = resp
        self.rec = rec
        self.frontend = frontend
        self.lane = frontend.lane() if frontend is not None else 0
        self.delay_s = delay_s
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[float, bytes, Before]] = asyncio.Queue()
        self.error: BaseException | None = None
        self.task = self.loop.create_task(self._writer())

    async def write(self, data: bytes, events: int, before: Before = None) -> None:
        if self.error is not None:
            raise self.error
        due = now = self.loop.time()
        if self.frontend is not None:
            due = self.frontend.reserve(self.lane, events, now)
        self.queue.put_nowait((due + self.delay_s, data, before))

    async def flush(self) -> None:
        await self.queue.join()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.task.cancel()

    async def _writer(self) -> None:
        q = self.queue
        while True:
            due, data, before = await q.get()
            try:
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self.rec.first_write_time is None:
                    self.rec.first_write_time = time.time()
                if before is not None:
                    before()
                await self.resp.write(data)
            except Exception as e:  # the client gone (ConnectionError): the handler raises it
                self.error = e
                q.task_done()
                while not q.empty():  # nothing more will be written: let flush() return
                    q.get_nowait()
                    q.task_done()
                return
            q.task_done()


def delivery(
    resp: web.StreamResponse, rec: TraceRecord, frontend: FrontEnd | None, delay_s: float
) -> Delivery:
    """The delivery of one streamed response: direct unless a front-end cost or a delay is set."""
    if frontend is None and delay_s <= 0:
        return DirectDelivery(resp, rec)
    return DelayedDelivery(resp, rec, frontend, delay_s)
