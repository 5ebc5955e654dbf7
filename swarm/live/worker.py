"""The worker side of the swarm's statistics: records in, mergeable deltas out.

On a worker (and on a local runner, for its own users): every `llm_request` record goes into an
`Aggregate` delta and, with `--swarm-out`, to the record writer (DIR/records/*.parquet). Each
Locust `report_to_master` carries the delta since the last report as `data["swarm"]`, a
`WorkerReport` (swarm/stats/wire.py): the aggregate's wire form plus `stopped`, `model_name`
and `cpu` ([[stage, CPU s, wall s, run-queue wait s]] since the last report, from
`time.process_time()` sampled every second), so a worker that dies loses at most its last unsent
interval. A local runner's master side pulls the same report every tick instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
from typing import Any

import gevent

from swarm.core.options import CUT_NOW_SIGNAL
from swarm.core.records import RequestRecord
from swarm.core.runfiles import RECORDS_DIR
from swarm.live import locust_fixes
from swarm.live.recorder import RecordWriter
from swarm.live.state import run_settings, swarm_state
from swarm.stats.aggregate import DRAIN, Aggregate
from swarm.stats.cpu import CpuMeter
from swarm.stats.wire import WIRE_KEY, WorkerReport

logger = logging.getLogger(__name__)

CPU_SAMPLE_S = 1.0  # process CPU time sampled this often, per stage


class WorkerStats:
    """One process's own requests: the unsent delta, the record writer, the CPU meter."""

    def __init__(self, environment: Any, runner: Any, role: str) -> None:
        self.environment = environment
        self.runner = runner
        self.role = role  # "worker" or "local"
        self.state = swarm_state(environment)
        settings = run_settings(environment)
        self.out_dir = settings.out_dir
        self.aggregate = Aggregate(settings.goodput)  # the delta not yet reported
        self.stopped = False  # no more records until the next test_start
        self.draining = False  # the stop has begun: what finishes now completes in the DRAIN window
        self.cpu = CpuMeter()
        self._writer: RecordWriter | None = None
        self._closed = False
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stopping.add_listener(self._on_test_stopping)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.reset_stats.add_listener(self._on_reset_stats)
        self.state.llm_request.add_listener(self._on_record)
        if role == "worker":
            ev.report_to_master.add_listener(self._on_report_to_master)
        self._ticker = gevent.spawn(self._cpu_forever)
        self._cut_handler = gevent.signal_handler(getattr(signal, CUT_NOW_SIGNAL), self.cut_now)
        if self.out_dir is not None:  # --swarm-out known now: pay the writer's one-off set-up at start-up,
            self._ensure_writer()  # not at test start, when every worker pays it at once and heartbeats wait

    # ---- records ---------------------------------------------------------------------------
    def _on_record(self, record: RequestRecord, **_: Any) -> None:
        if self._closed:
            return
        self.aggregate.add(record, DRAIN if self.draining else self.state.stage.index)
        if self.out_dir is not None:
            self._ensure_writer().add(record)

    def _ensure_writer(self) -> RecordWriter:
        """Created at test start: its one-off set-up (~0.3 s) must not stall requests in flight."""
        if self._writer is None:
            assert self.out_dir is not None
            part = f"{self.role}-{os.getpid()}-{secrets.token_hex(3)}"
            self._writer = RecordWriter(self.out_dir / RECORDS_DIR, part, background=True)
        return self._writer

    def _on_test_start(self, **_: Any) -> None:
        self.stopped = False
        self.draining = False
        self.state.stopping = False
        # the options as this test's start parsed them (swarm/live/user.py's test_start listener,
        # registered at import, runs before this one): a worker learns --swarm-out from the master
        settings = run_settings(self.environment)
        if self.out_dir is None:
            self.out_dir = settings.out_dir
        self.aggregate.goodput = settings.goodput  # and --goodput
        if self.out_dir is not None:
            self._ensure_writer()

    def _on_test_stopping(self, **_: Any) -> None:
        self.draining = True
        self.state.stopping = True

    def _on_test_stop(self, **_: Any) -> None:
        self.stopped = True

    def _on_reset_stats(self, **_: Any) -> None:
        if self.role == "local":
            self.aggregate = Aggregate(self.aggregate.goodput)

    # ---- reports ---------------------------------------------------------------------------
    def take_report(self) -> WorkerReport:
        """The delta since the last report, and this process's state; starts a new delta."""
        wire = self.aggregate.take_delta().to_wire()
        self.cpu.sample(self.running_stage())
        return {
            **wire,
            "stopped": self.stopped,
            "model_name": self.model_name(),
            "cpu": self.cpu.take(),
            "in_flight": self.state.in_flight,
            # Locust logged an exception of this process's code and went on: the master fails the run
            "internal_error": locust_fixes.internal_error_logged(),
        }

    def _on_report_to_master(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        data[WIRE_KEY] = self.take_report()

    def model_name(self) -> str | None:
        """--model, else what the users discovered from the target's /v1/models."""
        served = self.state.served
        return run_settings(self.environment).model_text or (served.model if served is not None else None)

    def running_stage(self) -> int | None:
        """The current stage while users run, else None (not counted as load)."""
        if self.stopped or self.runner.user_count == 0:
            return None
        return self.state.stage.index

    def _cpu_forever(self) -> None:
        while True:
            gevent.sleep(CPU_SAMPLE_S)
            self.cpu.sample(self.running_stage())

    # ---- the end ---------------------------------------------------------------------------
    def cut_now(self) -> None:
        """CUT_NOW_SIGNAL (a second Ctrl-C on `swarm run`): the stop's grace is over. Every user is
        killed at once; a request in flight is recorded as `cancelled` with what it measured up to
        the cut (swarm/client/transport.py), then the stop in progress finds no user left and the
        last report goes to the master as usual."""
        logger.info("swarm: %s: cutting the requests in flight now", CUT_NOW_SIGNAL)
        self.environment.stop_timeout = 0  # a stop that has not begun yet: no grace either
        locust_fixes.kill_users_now(self.runner)

    def hand_over_last_delta(self) -> None:
        """Worker quitting on its own (SIGTERM, Ctrl-C) rather than on the master's quit: stop the
        users and send what they produced since the last report, so an interrupted run loses nothing.

        From here on the worker takes no new users: when another worker quits first, the master
        hands its users to the workers left, and users spawned after this last report would send
        requests that no report ever carries (seen as a few requests missing after a Ctrl-C)."""
        locust_fixes.refuse_spawns(self.runner)
        with contextlib.suppress(Exception):
            if not self.stopped:
                self.runner.stop()
            # always: even with no new records, this report's `stopped` tells the master it is final
            locust_fixes.send_report_now(self.runner)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ValueError):
            self.state.llm_request.remove_listener(self._on_record)
        self._ticker.kill(block=False)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
