"""The swarm's statistics in a Locust process: import it from a locustfile (swarm/live/user.py does).

Importing it registers, Locust style, the swarm's options (swarm/live/options.py, from the one
table in swarm/core/options.py), the load shape's stage messages (swarm/live/shape.py) and, on
`init`, the statistics side of this process, by role, with narrow handles on it kept on the
environment (`environment.swarm.stats`, a `StatsHandles`):
- worker: a `WorkerStats` (swarm/live/worker.py): records -> a delta shipped with every report;
- master: a `MasterStats` (swarm/live/master.py): merges the deltas, watches the workers
  (worker_health.py) and their CPU (client_cpu.py), serves /metrics and the LLM tab (serving.py),
  writes summary.json and judges the SLOs (outcome.py);
- local: both, the master side pulling the local delta every tick.
A malformed --slo prints one line and exits 2 at start-up.
"""

from __future__ import annotations

import logging
from typing import Any

from gevent.event import Event
from locust import events
from locust.runners import MasterRunner, WorkerRunner

import swarm.live.shape  # noqa: F401  (registers the stage messages)
from swarm.core.errors import UsageError
from swarm.core.options import FINAL_REPORT_WAIT_S
from swarm.live import locust_fixes
from swarm.live.master import MasterStats
from swarm.live.options import exit_on_usage_error
from swarm.live.state import StatsHandles, run_settings, swarm_state
from swarm.live.worker import WorkerStats
from swarm.stats.aggregate import Aggregate

logger = logging.getLogger(__name__)


class StatsPlugin:
    """The statistics of one Locust process: its worker side, its master side, or both (local)."""

    def __init__(self, environment: Any, runner: Any, web_ui: Any = None) -> None:
        self.environment = environment
        self.runner = runner
        self.role = (
            "master"
            if isinstance(runner, MasterRunner)
            else "worker"
            if isinstance(runner, WorkerRunner)
            else "local"
        )
        self.worker = WorkerStats(environment, runner, self.role) if self.role != "master" else None
        self.master = (
            MasterStats(environment, runner, self.role, self.worker) if self.role != "worker" else None
        )
        self._quitting: Event | None = None  # set once the first `quitting` call is done
        environment.events.quitting.add_listener(self._on_quitting)
        if self.master is not None:
            if web_ui is not None:
                self.master.install_web_ui(web_ui)
            settings = run_settings(environment)
            if settings.prometheus_port:
                self.master.start_prometheus_server(settings.prometheus_port, settings.prometheus_host)

    def handles(self) -> StatsHandles:
        """What the users and the search reach of this side (swarm/live/state.py)."""
        master, worker = self.master, self.worker

        def merged() -> Aggregate:
            assert master is not None
            return master.merged()  # a local runner: its own latest records included

        def count_cut() -> None:
            assert worker is not None
            worker.aggregate.turns.cut += 1

        return StatsHandles(
            merged=merged if master is not None else None,
            count_cut=count_cut if worker is not None else None,
        )

    def _on_quitting(self, **_: Any) -> None:
        """Once. A second call waits for the first to finish: Locust can shut a worker down twice at
        the same time (its SIGTERM handler, and the master's quit message ending its main
        greenlet), and the second would otherwise exit the process while the first still writes
        the last records."""
        if self._quitting is not None:
            self._quitting.wait(timeout=float(self.environment.stop_timeout or 0) + FINAL_REPORT_WAIT_S + 5)
            return
        self._quitting = Event()
        try:
            if self.role == "worker" and self.worker is not None and not self.worker._closed:
                self.worker.hand_over_last_delta()
            if self.master is not None:
                self.master.finish()
            if self.worker is not None:
                self.worker.close()
        finally:
            self._quitting.set()


@events.init.add_listener
def _on_init(environment: Any, runner: Any = None, web_ui: Any = None, **_: Any) -> None:
    runner = runner or environment.runner
    if runner is None:
        return
    try:
        swarm_state(environment).stats = StatsPlugin(environment, runner, web_ui).handles()
    except UsageError as e:
        exit_on_usage_error(e, prog="swarm")
    if isinstance(runner, MasterRunner):
        locust_fixes.quit_once(runner)
        locust_fixes.await_expected_workers(environment, runner)
