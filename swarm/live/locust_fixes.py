"""Every place the swarm reaches into Locust's internals or works around its behaviour, in one module.

Each function below was written against Locust 2.47.0 (the version installed then; pyproject.toml
allows >=2.40,<3) and says what upstream does, where (the file and function in that release), and
when it can go. On a Locust upgrade, read this module first: every caller goes through these
functions, so a renamed private attribute or a fixed upstream bug shows up here and nowhere else.
(swarm/live/user.py also sets `locust.log.unhandled_greenlet_exception`, Locust's own flag, when a
user's start-up fails: `mark_internal_error` is the function for it.)
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from locust import log as locust_log


def fill_missing_user_classes_count(environment: Any, runner: Any) -> None:
    """Give a worker's report that lacks `user_classes_count` the master's last known counts.

    Locust 2.47, locust/runners.py `MasterRunner.__init__` -> `on_worker_report`, reads
    `data["user_classes_count"]` unguarded. A worker told to quit while still starting (its
    `WorkerRunner` waits for the master's ack, its message loop already running) sends a last
    report before Locust registered its own `report_to_master` listener, so the key is missing:
    KeyError in the master's handler and the run exits 2 (seen with 24 workers on a starved
    2-core machine). The same unguarded read was reported for non-Python workers
    (https://github.com/myzhan/locust4j/pull/33); the neighbouring `spawning_complete` case was
    guarded in https://github.com/locustio/locust/pull/3516, this one not.

    Reaches into `EventHook._handlers` to run before Locust's own listener (`add_listener`
    appends). Delete when `on_worker_report` uses `data.get("user_classes_count")`
    (tests/integration/test_worker_quit_while_starting.py tells)."""

    def complete(client_id: str, data: dict[str, Any], **_: Any) -> None:
        if "user_classes_count" not in data:
            client = runner.clients.get(client_id)
            data["user_classes_count"] = dict(getattr(client, "user_classes_count", None) or {})
            data.setdefault("user_count", sum(data["user_classes_count"].values()))

    environment.events.worker_report._handlers.insert(0, complete)


def refuse_spawns(runner: Any) -> None:
    """From now on this worker ignores the master's `spawn` messages (every other one goes on).

    Locust 2.47, locust/runners.py `WorkerRunner.worker` calls `self.handle_message(msg)` for every
    message, and a worker quitting on its own (SIGTERM, Ctrl-C) still obeys a `spawn` sent after
    its last report (the master rebalancing another worker's users onto it): those users send
    requests no report ever carries. Locust has no "draining" state for a worker; this wraps the
    bound `handle_message` on the instance. Delete if Locust stops spawning on a quitting worker
    (its `quit` handling in `WorkerRunner.handle_message`)."""
    handle = runner.handle_message

    def no_more_spawns(msg: Any) -> None:
        if msg.type != "spawn":
            handle(msg)

    runner.handle_message = no_more_spawns


WORKERS_POLL_S = 0.05  # how often the master looks for its expected workers before a headless start
WORKERS_QUIET_WAIT_S = 5.0  # Locust's own loop logs nothing for its first 5 s of waiting either


def await_expected_workers(environment: Any, runner: Any) -> None:
    """Before a headless master starts, wait for its `--expect-workers` in steps of 50 ms.

    Locust 2.47, locust/main.py `main` -> `start_automatic_run`: while fewer workers are ready than
    expected it sleeps a whole second between looks, so a run whose workers report ready a few ms
    after the master's first look starts up to a second late (every `swarm run`: its workers
    import alongside the master). Called from the `init` event, which `main` fires just before that
    loop: the workers are ready when Locust looks, and its loop is skipped. Gives up quietly after
    5 s (or `--expect-workers-max-wait`, if shorter) and leaves the rest, with its log lines and
    its own give-up, to Locust. Delete when Locust polls its workers more often."""
    options = getattr(environment, "parsed_options", None)
    expected = getattr(options, "expect_workers", 0) or 0
    if options is None or not getattr(options, "headless", False) or expected < 1:
        return
    limit = WORKERS_QUIET_WAIT_S
    if getattr(options, "expect_workers_max_wait", 0):
        limit = min(limit, float(options.expect_workers_max_wait))
    for _ in range(round(limit / WORKERS_POLL_S)):
        if len(runner.clients.ready) >= expected:
            return
        gevent.sleep(WORKERS_POLL_S)


QUIT_WAIT_S = 0.5  # Locust's wait for the workers' last reports at quit (`MasterRunner.quit`)
QUIT_POLL_S = 0.01


def quit_once(runner: Any) -> None:
    """Make the master's `quit` do its work once, and end its wait as soon as every worker has quit;
    a later call waits for the first to end.

    Locust 2.47, locust/runners.py `MasterRunner.quit`: `stop(send_stop_to_client=False)`, a `quit`
    message to every worker, `gevent.sleep(0.5)` "to wait for final stats report from all workers",
    then `self.greenlet.kill(block=True)` (its message listener among them). A headless run whose
    load shape ends calls it from `shape_worker`; locust/main.py `main` calls it again when the
    shape's greenlet has ended (`start_automatic_run` -> `stop_and_optionally_quit`, "Shape test
    completed, shutting down") and a third time in `shutdown`: every `swarm run` slept 1.5 s.

    Here the same steps run once, and the wait ends when no worker is left in `runner.clients`
    (at most the same 0.5 s): a worker told to quit sends its last stats, then (Locust's
    `on_quitting`, after the swarm's own quitting handler) its `quit`, and the master's listener
    handles each worker's messages in order, removing the worker at its `quit`: once none is left,
    every message a worker sent before leaving has been handled, as the sleep meant. The swarm reads
    whatever comes later itself (`receive_message`). A call made while the first is under way (a
    SIGTERM at the shape's end; the listener's own "The last worker quit" quit) returns when it
    has ended. Wraps the bound `quit` on the instance. Delete when `main` does not quit a runner
    that has quit and `MasterRunner.quit` stops waiting once its workers are gone."""
    from locust.rpc import Message

    ended = gevent.event.Event()
    started = False

    def once() -> None:
        nonlocal started
        if started:
            ended.wait()
            return
        started = True
        try:
            runner.stop(send_stop_to_client=False)
            for client in list(runner.clients.all):
                runner.server.send_to_client(Message("quit", None, client.id))
            for _ in range(round(QUIT_WAIT_S / QUIT_POLL_S)):
                if not len(runner.clients):
                    break
                gevent.sleep(QUIT_POLL_S)
            runner.greenlet.kill(block=True)
        finally:
            ended.set()

    runner.quit = once


def dispatch_to_late_workers(runner: Any) -> bool:
    """Master: give the users to a worker that connected mid-test and got none, as Locust means to
    do for every worker that connects while the test runs; True when it did.

    Locust 2.47, locust/runners.py `MasterRunner.client_listener`, "client_ready": a worker that
    connects mid-test is added to the users dispatcher, and `start(target_user_count, spawn_rate)`
    re-dispatches the users `if not self._users_dispatcher.dispatch_in_progress and self.state ==
    STATE_RUNNING` (its comment: "TODO: Test this situation"). But locust/dispatch.py
    `UsersDispatcher._dispatcher` returns from its rebalance branch (`if self._rebalance: ...
    return`) without clearing `_dispatch_in_progress`: after the first worker that joins mid-test
    the flag stays True, and every later one (joining, self-healed after missing) waits `ready`
    with no users until the load changes, which a stage of a shape never does: two workers joining
    0.3 s apart left the second idle for the rest of the stage. Called on the master's bookkeeping
    tick: once the master is RUNNING with its last spawn complete, a worker still `ready` (never
    spawned) gets what Locust's own `start` would have given it. Delete when the dispatcher clears
    the flag on that return (tests/integration/test_rate_rebalance.py tells)."""
    from locust.runners import STATE_RUNNING

    if (
        runner.state != STATE_RUNNING
        or not getattr(runner, "spawning_completed", False)
        or not runner.target_user_count
        or not runner.clients.ready
    ):
        return False
    runner.start(runner.target_user_count, runner.spawn_rate)
    return True


def send_report_now(runner: Any) -> None:
    """Send this worker's report to the master now, as Locust's own reporter does every few seconds.

    Locust 2.47, locust/runners.py `WorkerRunner._send_stats` (private; `stats_reporter` calls it
    every WORKER_REPORT_INTERVAL): it fires `report_to_master` and sends the `stats` message. A
    worker quitting on its own needs its last delta sent before it goes, and Locust offers no
    public "report now". Delete when Locust has a public way to flush a worker's report."""
    runner._send_stats()


def kill_users_now(runner: Any) -> None:
    """Kill every running user at once (in a greenlet of its own), without the stop's grace.

    Locust 2.47, locust/runners.py `Runner.stop` waits --stop-timeout for users to finish their
    task; the swarm's second Ctrl-C cuts that short by killing `Runner.user_greenlets` (an
    undocumented `gevent.pool.Group`), which is what `stop` itself does once the grace is over.
    Delete if Locust gains a "stop now" on the runner."""
    gevent.spawn(runner.user_greenlets.kill, block=True)


def shape_greenlet(runner: Any) -> Any | None:
    """The load shape's greenlet (None: no shape ran, or Locust dropped it when the shape ended).

    Locust 2.47, locust/runners.py `Runner.start_shape` keeps it on `runner.shape_greenlet`
    (undocumented) and `shape_worker` sets it to None when the shape's tick returns None. Killing
    it is how the swarm ends a headless shape run: locust/main.py `main` joins it and then quits.
    Delete with its callers (swarm/live/sigterm.py, swarm/live/master.py `_stop_run`) if Locust
    gets a public way to end a shape run."""
    return getattr(runner, "shape_greenlet", None)


def watch_sigterm_before_locust(handler: Callable[[], None]) -> Any:
    """Run `handler` on SIGTERM; returns gevent's watcher (cancel it to drop the handler).

    Locust 2.47, locust/main.py `main`: headless with a load shape, `shape_greenlet.join()` runs
    before `gevent.signal_handler(signal.SIGTERM, sig_term_handler)` is installed, so until the
    shape has ended SIGTERM kills the master outright: no quit for the workers, no summary. The
    swarm's handler (swarm/live/sigterm.py) ends the shape instead. Keep the watcher for the
    process's life: cancelling the last one restores the default disposition. Delete when
    Locust installs its SIGTERM handler before it starts a headless shape."""
    return gevent.signal_handler(signal.SIGTERM, handler)


def master_receiving(runner: Any) -> bool:
    """Whether Locust's master still runs its greenlets (its `client_listener` among them).

    Locust 2.47, locust/runners.py `MasterRunner.quit` sends `quit` to the workers, waits only
    0.5 s for their last reports and kills `runner.greenlet` (the `client_listener`): a worker
    that lets its requests in flight finish for --stop-timeout reports after that. Delete with
    `receive_message` when `quit` waits for the workers' final reports."""
    return bool(len(runner.greenlet))


def receive_message(runner: Any, timeout_s: float) -> tuple[str, str, Any] | None:
    """The next message from a worker (node id, type, data), read off Locust's master socket
    after its `client_listener` has stopped (see `master_receiving`); None after `timeout_s`.

    Locust 2.47, locust/rpc/zmqrpc.py `Server.recv_from_client`, called the way
    locust/runners.py `MasterRunner.client_listener` calls it."""
    received = None
    with gevent.Timeout(timeout_s, False):
        received = runner.server.recv_from_client()
    if received is None:
        return None
    _, msg = received
    return msg.node_id, msg.type, msg.data


def internal_error_logged() -> bool:
    """Whether Locust logged an exception raised in an event handler or a greenlet and went on.

    Locust 2.47, locust/log.py keeps it in the module global `unhandled_greenlet_exception`
    (undocumented; `main` turns it into exit code 2 at the end). The swarm reads it to say so in
    its own exit code and in each worker's report. Delete if Locust exposes it on the
    environment or the runner."""
    return bool(locust_log.unhandled_greenlet_exception)


def mark_internal_error() -> None:
    """Set the flag `internal_error_logged` reads, as Locust's greenlet exception handler does
    (locust/log.py `greenlet_exception_logger`), for an error the swarm logs itself."""
    locust_log.unhandled_greenlet_exception = True
