"""Trace replay (`--trace-replay FILE`): every trace row sent exactly once, at its own time, across
all workers.

The master owns the schedule (swarm/load/trace.py `Trace`). A `Dispatcher` starts the replay's
clock LEAD_S after the shape's first tick and, every TICK_S, hands each live worker a lease: the
rows due within the next LEASE_AHEAD_S seconds, with their send times as wall-clock times (master
and workers read one clock; across machines keep them NTP-synced), balanced to the worker with
the fewest rows outstanding. Each worker keeps its rows in a `ReplayQueue`; a free user takes the
next row, builds its prompt (swarm/load/trace_prompts.py: the row's exact input length, its
prefix blocks shared as the trace says), sleeps until the row is due, tells the master it claims
the row (CLAIM, with its send lag), and sends it with `max_tokens` = the row's output length and
ignore_eos; the record carries `trace_row`, the request body `user: trace-row-N` (the
simulator's trace keeps it). After the record, DONE.

A worker that Locust marks missing (no heartbeats), or that has rows overdue by STALL_S without
claiming any, gets no new rows; once missing, its leased and unclaimed rows go to the others
(counted as re-assigned in summary.json `trace_replay`, and logged), and it is told to drop its
queue in case it comes back. One that comes back (its heartbeats again: a worker whose CPU was
starved for a few seconds) takes new rows from then on. A row it claimed was sent: it is never
sent again. A request claimed and then cut off by a kill is the only way a row can reach the
server twice or not at all, and only in the microseconds between the claim and the request's
first bytes.

Lateness: each request's `send_lag_s` (the record field, a latency in every summary block); the
master also keeps each worker's lag, logs live when a worker sends a row more than
`--trace-max-lag` late, and names those workers in summary.json.

This module is the Locust side (options, messages, the user's task, the test start); the
schedule itself (`Dispatcher`, `ReplayQueue`, `Replay`) is swarm/live/replay_schedule.py.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from swarm.core.errors import SwarmError
from swarm.live.replay_schedule import (
    CLAIM,
    DONE,
    LEASE,
    READY,
    READY_REPEAT_S,
    REVOKE,
    Dispatcher,
    Replay,
    ReplayQueue,
)
from swarm.live.state import swarm_state
from swarm.load.request import LLMRequest
from swarm.load.trace import Trace, TraceRow, load_trace
from swarm.load.trace_prompts import TracePrompts

log = logging.getLogger(__name__)

WORKLOAD = "trace"


def trace_of(environment: Any) -> Trace | None:
    """The trace of `--trace-replay` (loaded once per process; UsageError naming a bad line)."""
    state = swarm_state(environment)
    given = state.settings(environment).trace
    if given is None:
        return None
    cached = state.trace
    if cached is not None and cached[0] == given:
        return cached[1]
    trace = load_trace(
        given.path,
        given.format,
        time_scale=given.time_scale,
        start_s=given.start_s,
        duration_s=given.duration_s,
        block_size=given.block_size,
    )
    state.trace = (given, trace)
    return trace


# ---- worker side -----------------------------------------------------------------------------


def replay_task(user: Any) -> None:
    """One request of the replay for `user` (an LLMUser): the next row, at its time."""
    state = user.state
    r: Replay | None = state.replay
    if r is None or r.queue is None or r.prompts is None:
        gevent.sleep(0.05)  # the test start's preparation is not done yet
        return
    if not r.leased and r.announce is not None and time.monotonic() - r.last_ready > READY_REPEAT_S:
        r.last_ready = time.monotonic()  # the users say READY too: see _prepare_worker's caller
        r.announce()
    if not r.queue.wait(0.2):  # (outside the gate: a stop ends every idle user within 0.2 s)
        return
    queue = r.queue
    item = None
    generation = queue.generation
    try:
        with state.arrival_gate:
            item = queue.take()
            if item is None:
                return
            row = item.row
            req = LLMRequest(
                WORKLOAD,
                [{"role": "user", "content": r.prompts.text(row)}],
                max(1, row.output_tokens),
                None,
                not user.opts.knobs.no_ignore_eos,
                prompt_tokens=row.input_tokens,
            )
            delay = item.due_wall - time.time()
            if delay > 0:
                gevent.sleep(delay)
    except BaseException:  # killed before sending (a stop, fewer users after a rebalance): the row goes back
        if item is not None and generation == queue.generation:
            queue.add([(item.due_wall, item.row)])
        raise
    if generation != r.queue.generation:
        return  # the master took this worker's rows back meanwhile
    lag = max(0.0, time.time() - item.due_wall)
    r.send_claim(row.row, lag)
    try:
        user.send(req, send_lag_s=lag, trace_row=row.row)
    finally:
        r.send_done(row.row)


def _build_prompts(environment: Any, r: Replay, tokenizer: Any) -> None:
    settings = swarm_state(environment).settings(environment)
    assert settings.trace is not None  # (prepare_replay's caller checked)
    seed = settings.seed if settings.seed is not None else random.SystemRandom().getrandbits(62)
    prompts = TracePrompts(settings.trace.block_size, seed)
    opts = settings.llm
    r.queue = ReplayQueue()
    prompts.prepare(tokenizer(), chat=opts.endpoint == "chat", progress=log.info)
    r.prompts = prompts


def _prepare_worker(environment: Any, r: Replay, tokenizer: Any) -> None:
    """Worker: build the prompts, then say READY every READY_REPEAT_S until the first lease."""
    runner = environment.runner
    try:
        _build_prompts(environment, r, tokenizer)
    except SwarmError as e:  # as at test start (live/user.py): one line, exit code 2
        log.error("%s", e)
        environment.process_exit_code = 2
        runner.quit()
        return
    state = swarm_state(environment)
    while state.replay is r and not r.leased:
        runner.send_message(READY, None)
        gevent.sleep(READY_REPEAT_S)


def prepare_replay(environment: Any, tokenizer: Any) -> None:
    """On test start: the dispatcher (master, local) and the queue and prompts (worker, local).
    `tokenizer()` opens the prompt tokenizer (live/prepare.py)."""
    state = swarm_state(environment)
    given = state.settings(environment).trace
    if given is None:
        state.replay = None
        return
    runner = environment.runner
    r = state.replay = Replay()
    is_master = isinstance(runner, MasterRunner)
    is_worker = isinstance(runner, WorkerRunner)
    if not is_worker:
        trace = trace_of(environment)
        assert trace is not None
        r.dispatcher = Dispatcher(runner, trace, given.max_lag_s, local=not is_master)
    if is_master:
        return
    if is_worker:
        r.send_claim = lambda row, lag: runner.send_message(CLAIM, {"row": row, "lag": lag})
        r.send_done = lambda row: runner.send_message(DONE, {"row": row})
        r.announce = lambda: runner.send_message(READY, None)
        # In a greenlet of its own, not in Locust's message loop (the prompts take seconds). READY
        # is said by the users too (replay_task, until the first lease): a worker is announced
        # even where this greenlet stops before it says so (a late worker's has; cause not found).
        gevent.spawn(_prepare_worker, environment, r, tokenizer)
        return
    _build_prompts(environment, r, tokenizer)  # local: the dispatcher is in this process
    d = r.dispatcher
    assert d is not None
    d.send = lambda _worker, rows: r.queue.add(rows)  # type: ignore[union-attr]
    r.send_claim = lambda row, lag: d.on_claim("local", row, lag)
    r.send_done = lambda row: d.on_done("local", row)
    d.ready.add("local")


# ---- messages ----------------------------------------------------------------------------------


def _on_lease(environment: Any, data: dict[str, Any]) -> None:
    r = swarm_state(environment).replay
    if r is None or r.queue is None:
        log.error("swarm: trace replay: rows arrived before this worker was ready; they wait")
        gevent.spawn_later(0.05, _on_lease, environment, data)
        return
    r.leased = True
    r.queue.add([(float(v[0]), TraceRow.from_wire(v[1:])) for v in data["rows"]])


def _on_revoke(environment: Any) -> None:
    r = swarm_state(environment).replay
    if r is not None and r.queue is not None:
        n = r.queue.revoke()
        log.warning("swarm: trace replay: the master took back this worker's %d queued rows", n)


def _dispatcher(environment: Any) -> Dispatcher | None:
    r = swarm_state(environment).replay
    return r.dispatcher if r is not None else None


@events.init.add_listener
def _on_init(environment: Any, **_kwargs: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.register_message(LEASE, lambda msg, **_: _on_lease(environment, msg.data))
        runner.register_message(REVOKE, lambda msg, **_: _on_revoke(environment))
    elif isinstance(runner, MasterRunner):

        def claim(msg: Any, **_: Any) -> None:
            d = _dispatcher(environment)
            if d is not None:
                d.on_claim(msg.node_id, int(msg.data["row"]), float(msg.data["lag"]))

        def done(msg: Any, **_: Any) -> None:
            d = _dispatcher(environment)
            if d is not None:
                d.on_done(msg.node_id, int(msg.data["row"]))

        def ready(msg: Any, **_: Any) -> None:
            d = _dispatcher(environment)
            if d is not None and msg.node_id not in d.ready:
                d.ready.add(msg.node_id)
                if d.t0 is not None:
                    log.info("swarm: trace replay: worker %s joined; it takes rows from now on", msg.node_id)

        runner.register_message(CLAIM, claim)
        runner.register_message(DONE, done)
        runner.register_message(READY, ready)


__all__ = ["WORKLOAD", "prepare_replay", "replay_task", "trace_of"]
