"""The master side of the swarm's statistics: the composition of its jobs, and the run's clock.

On a master (and a local runner): merges every worker's `WorkerReport` delta (swarm/stats/wire.py)
into one `Aggregate`, and hands each report to the job that reads it: the workers' standing
(swarm/live/worker_health.py: missing workers, final reports), their CPU (swarm/live/client_cpu.py:
client-bound stages, DIR/client_cpu.jsonl), the web UI's rates (swarm/stats/rates.py) and charts
(swarm/live/series.py), and with --abort-on the circuit breaker (swarm/stats/abort.py: it ends
the run when a condition holds over its window; summary.json's `aborted` says why, exit code 3).
Serves /metrics and the LLM tab (swarm/live/serving.py); on a headless shape run, handles SIGTERM
until Locust does (swarm/live/sigterm.py).

At `quitting`: waits up to FINAL_REPORT_WAIT_S (after --stop-timeout) for workers' final reports,
builds summary.json (swarm/stats/summary.py, plus swarm/stats/summary_sections.py), writes it and
sets the exit code (swarm/live/outcome.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from swarm.core.units import new_run_id
from swarm.live import locust_fixes, outcome, serving, sigterm, webui
from swarm.live.client_cpu import ClientCpu
from swarm.live.exporter import ExportState, registry_for
from swarm.live.provenance import RunProvenance
from swarm.live.replay import WORKLOAD as replay_workload
from swarm.live.series import LiveSeries, stage_markers
from swarm.live.shape import share_rate, stage_timeline
from swarm.live.state import run_settings, swarm_state
from swarm.live.worker import WorkerStats
from swarm.live.worker_health import WorkerHealth, collect_final_reports
from swarm.stats import abort, rates, slo, summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.summary import Summary, iso_time
from swarm.stats.summary_sections import Sections, add_sections
from swarm.stats.trace_replay import replay_lines
from swarm.stats.wire import WIRE_KEY, WorkerReport

logger = logging.getLogger(__name__)

TICK_S = 1.0  # bookkeeping: users, workers, degraded workers, rates, a local runner's delta
SUMMARY_AFTER_STOP_S = 4.0  # write summary.json this long after a test stops, too


class MasterStats:
    """The run's statistics as the master (or a local runner) sees them."""

    def __init__(self, environment: Any, runner: Any, role: str, local: WorkerStats | None = None) -> None:
        self.environment = environment
        self.runner = runner
        self.role = role  # "master" or "local"
        self.local = local  # a local runner's own WorkerStats, pulled every tick
        self.state = swarm_state(environment)
        settings = run_settings(environment)  # bad --slo, --search, --goodput, --abort-on: exit 2 at start-up
        self.out_dir = settings.out_dir
        self.summary_path = settings.summary_path  # summary.json, or under swarm run its part
        self.run_id = settings.run_id or new_run_id()
        self.objectives = list(settings.objectives) if settings.objectives is not None else None
        self.goodput_slo = settings.goodput.text if settings.goodput is not None else None
        # --abort-on: the circuit breaker (swarm/stats/abort.py)
        self.breaker = abort.Breaker(list(settings.abort_on)) if settings.abort_on else None
        self.aggregate = Aggregate()
        self.model_name: str | None = settings.model_text
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.stopped_s: float | None = None  # the stop began: the end of the load window
        self.max_users = 0
        self.max_workers = 0
        self.health = WorkerHealth()
        self.client_cpu = ClientCpu(self.out_dir)
        self.rates = rates.RateWindow()
        self.verdicts: list[slo.Verdict] = []
        self.aborted: dict[str, Any] | None = None  # summary.json's `aborted` once a condition held
        self.series = LiveSeries()  # the LLM tab's charts (swarm/live/series.py)
        self._charts = False  # a web UI shows them (headless: no series kept)
        self._summary_writer: Any = None
        self.provenance = RunProvenance(environment)  # read once per test, at its start
        self._closed = False
        self._listen(environment.events)
        self._registry = registry_for(self.export_state)
        self._ticker = gevent.spawn(self._tick_forever)
        self._sigterm = sigterm.watch_if_needed(environment, runner, lambda: self.start_s is not None)

    def _listen(self, ev: Any) -> None:
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stopping.add_listener(self._on_test_stopping)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.reset_stats.add_listener(self._on_reset_stats)
        if self.role == "master":
            ev.worker_report.add_listener(self._on_worker_report)
            locust_fixes.fill_missing_user_classes_count(self.environment, self.runner)
            ev.worker_connect.add_listener(self._on_worker_connect)

    # ---- reports in ------------------------------------------------------------------------
    def _on_worker_connect(self, client_id: str, **_: Any) -> None:
        self.health.connected(client_id)

    def _on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(WIRE_KEY)
        if payload is None:
            return
        self.health.reported(client_id)
        self.merge_report(client_id, payload)

    def merge_report(self, client_id: str, payload: WorkerReport) -> None:
        """One worker's delta (or a local runner's own) into the run's statistics."""
        try:
            read = Aggregate.read_wire(payload)  # every part checked before anything is added
        except (ValueError, KeyError, TypeError) as e:
            logger.error("swarm: ignoring a report from worker %s: %s", client_id, e)
            return
        self.aggregate.merge_read(read)
        if self._charting():
            self.series.add(read)
        if self.breaker is not None:
            self.breaker.add(time.time(), read)
        self.health.note(client_id, payload)
        self.client_cpu.add(client_id, payload.get("cpu"))
        if not self.model_name and payload.get("model_name"):
            self.model_name = str(payload["model_name"])

    def _charting(self) -> bool:
        """A web UI shows the charts and a test runs: reports go into them and points are sampled."""
        return self._charts and self.start_s is not None and self.end_s is None

    def _pull_local(self) -> None:
        if self.local is not None and not self._closed:
            self.merge_report("local", self.local.take_report())

    def merged(self) -> Aggregate:
        """The run's aggregate, a local runner's latest records included."""
        self._pull_local()
        return self.aggregate

    def current_model(self) -> str | None:
        """--model, else what the workers discovered from the target's /v1/models."""
        if self.local is not None:
            return self.model_name or self.local.model_name()
        return self.model_name

    # ---- bookkeeping -------------------------------------------------------------------------
    def _tick_forever(self) -> None:
        while True:
            try:
                self._tick()
            except Exception:  # bookkeeping must never take the run down
                logger.exception("swarm: bookkeeping failed")
            gevent.sleep(TICK_S)

    def _tick(self) -> None:
        now = time.time()
        self._pull_local()
        self.max_users = max(self.max_users, self.runner.user_count)
        if self.role == "master":
            self.max_workers = max(self.max_workers, self.runner.worker_count)
            self.health.check(self.runner)
            if locust_fixes.dispatch_to_late_workers(self.runner):  # joined during a spawn: now its users
                logger.info("swarm: users dispatched again to %d workers", self.runner.worker_count)
            share_rate(self.environment)  # open loop: a worker quit or went missing mid-stage
        self.client_cpu.flag_bound()
        self.rates.add(now, rates.counts(self.aggregate))
        if self._charting() and self.series.due(now):
            self.series.sample(
                now, self.current_rates(), self.health.in_flight_total(), self.runner.user_count
            )
        self._check_breaker(now)

    def _check_breaker(self, now: float) -> None:
        """--abort-on: while the test runs, a condition that holds ends it (once), as -t would."""
        if self.breaker is None or self.aborted is not None or self.start_s is None:
            return
        if self.stopped_s is not None or self.end_s is not None:
            return
        trip = self.breaker.check(now, self.start_s)
        if trip is None:
            return
        self.aborted = trip.entry(iso_time(now))
        logger.error("swarm: %s: ending the run (--abort-on %s)", trip.reason, trip.condition.text)
        gevent.spawn(self._stop_run)

    def _stop_run(self) -> None:
        """End the test the way Locust ends one at -t; the stop goes on as any other: in-flight
        requests get --stop-timeout, then are recorded as cancelled. Headless with a load shape,
        Locust's main waits for the shape and then quits: ending the shape is the whole stop (a
        quit of our own beside it would stop the users twice, which Locust 2.47 refuses with an
        exception per user). Headless without one: quit; with a web UI: stop (the UI stays)."""
        shape = locust_fixes.shape_greenlet(self.runner)
        if not run_settings(self.environment).headless:
            self.runner.stop()
        elif shape is not None and not shape.dead:
            shape.kill(block=False)
        else:
            self.runner.quit()

    def current_rates(self) -> dict[str, tuple[float, float]]:
        """workload -> (requests/s, output tokens/s) over the last RATE_WINDOW_S seconds."""
        return self.rates.rates()

    @property
    def stage(self) -> int:
        return self.state.stage.index

    def _on_test_start(self, **_: Any) -> None:
        if self.end_s is not None:  # a new test in the same web UI session: start afresh
            self._pull_local()
            self.aggregate = Aggregate()
            self.health.clear()
            self.client_cpu.clear()
            self.state.stage.timeline.clear()
            self.end_s = None
            self.series.clear()
        self.stopped_s = None
        self.start_s = time.time()
        self.provenance.start()
        self.aborted = None
        if self.breaker is not None:
            self.breaker.clear()

    def _on_test_stopping(self, **_: Any) -> None:
        if self.start_s is not None and self.stopped_s is None:
            self.stopped_s = time.time()

    def _on_test_stop(self, **_: Any) -> None:
        if self.start_s is None:
            return
        self.end_s = time.time()
        if self.stopped_s is None:
            self.stopped_s = self.end_s
        if self.summary_path is not None:  # late deltas land in the final write at quit
            self._summary_writer = gevent.spawn_later(
                SUMMARY_AFTER_STOP_S, outcome.write_summary_quietly, self.build_summary, self.summary_path
            )

    def _on_reset_stats(self, **_: Any) -> None:
        self.aggregate = Aggregate()

    # ---- out -------------------------------------------------------------------------------
    def export_state(self) -> ExportState:
        self._pull_local()
        return ExportState(
            aggregate=self.aggregate,
            run_id=self.run_id,
            model_name=self.current_model() or "unknown",
            users=self.runner.user_count,
            workers=self.runner.worker_count if self.role == "master" else 1,
            stage=self.stage,
            degraded_workers=len(self.health.degraded),
            replay_late_rows=self._replay_late_rows(),
            run_info=self.provenance.run_info(),
        )

    def _replay_late_rows(self) -> int | None:
        replay = self.state.replay
        if replay is None or replay.dispatcher is None:
            return None
        return sum(wl.late for wl in replay.dispatcher.lag.values())

    def build_summary(self) -> Summary:
        self._pull_local()
        end = self.end_s if self.end_s is not None else (time.time() if self.start_s is not None else None)
        windows = self.state.stage.windows(self.start_s, self.stopped_s or end)
        s = summary.build(
            self.aggregate,
            run_id=self.run_id,
            model_name=self.current_model(),
            start_s=self.start_s,
            end_s=end,
            stopped_s=self.stopped_s,
            users=self.max_users,
            workers=self.max_workers if self.role == "master" else 1,
            degraded_workers=list(self.health.degraded.values()),
            stage_windows={k: (w.start_s, w.end_s) for k, w in windows.items()},
            goodput_slo=self.goodput_slo,
            task_slo_s=slo.task_bound(self.objectives),
        )
        return add_sections(s, self._sections())

    def _sections(self) -> Sections:
        """What summary.json holds beside the aggregate's figures (swarm/stats/summary_sections.py)."""
        shares = {
            w.name: share
            for mix in self.state.mixes.values()
            for w, _ in mix.items
            if (share := getattr(w, "intended_prefix_share", None)) is not None
        }
        replay = self.state.replay.dispatcher if self.state.replay is not None else None
        return Sections(
            timeline=stage_timeline(self.environment),
            prefix_shares=shares,
            trace_replay=replay.summary() if replay is not None else None,  # --trace-replay (live/replay.py)
            replay_workload=replay_workload,
            client_bound=self.client_cpu.load.bound(),
            verdicts=self.verdicts,
            search=self.state.search,
            aborted=self.aborted,
            provenance=self.provenance.block(list(self.health.known), self.out_dir, self.role != "master")
            if self.start_s is not None
            else None,
            prefix_bust=run_settings(self.environment).bust_prefix,
        )

    # ---- the end ---------------------------------------------------------------------------
    def finish(self) -> None:
        """At quit: the last reports, the summary, the SLO verdicts and the exit code."""
        if self._closed:
            return
        if self.role == "master":
            collect_final_reports(self.environment, self.runner, self.health)
        elif self.runner.state in (STATE_SPAWNING, STATE_RUNNING):
            # A signal (SIGTERM, Ctrl-C) fires `quitting` before Locust stops the users: stop them
            # here, so the requests in flight finish (or are cancelled) and are in the summary.
            self.runner.stop()
        if self.start_s is not None and self.end_s is None:
            self._on_test_stop()
        if self._summary_writer is not None:
            self._summary_writer.kill(block=False)
        self.provenance.wait()  # a target slow to say what it is: a few seconds at most
        self._tick()
        if self.objectives is not None:
            self.verdicts = slo.evaluate(self.objectives, self.build_summary())
        final = self.build_summary()  # what summary.json holds, and what the lines below print
        if self.summary_path is not None:
            outcome.write_summary(final, self.summary_path)
        self.close()
        self._judge(final)

    def _judge(self, final: Summary) -> None:
        """The closing lines and the exit code, in the order each overrides the last."""
        if self.state.replay is not None and self.state.replay.dispatcher is not None:
            self.state.replay.dispatcher.stop()
            outcome.print_lines(replay_lines(final))
        outcome.print_lines(self.health.lines())
        if self.objectives is not None:
            outcome.judge_slos(self.environment, self.verdicts)
        outcome.judge_answers(self.environment, final.get("total") or {})
        if self.state.search is not None:
            outcome.judge_search(self.environment, final, self.state.search)
        if self.aborted is not None:
            outcome.judge_abort(self.environment, self.aborted)
        outcome.judge_internal_errors(self.environment, self.health.internal_errors, self.role)

    def close(self) -> None:
        self._closed = True
        self._ticker.kill(block=False)
        self.client_cpu.close()

    # ---- serving ---------------------------------------------------------------------------
    def install_web_ui(self, web_ui: Any) -> None:
        serving.install_web_ui(
            web_ui,
            self._registry,
            lambda: webui.rows(self.aggregate, self.current_rates(), self.client_status()),
            lambda: self.series.to_json(stage_markers(stage_timeline(self.environment))),
        )
        self._charts = True

    def client_status(self) -> str:
        """The LLM tab's "Client" column: client-bound stages, or the busiest worker's CPU."""
        return webui.client_status(
            self.client_cpu.load.bound(),
            self.client_cpu.load.busiest(),
            multi_stage=bool(stage_timeline(self.environment)),
        )

    def start_prometheus_server(self, port: int, host: str = "") -> None:
        serving.start_prometheus_server(port, self._registry, host)
