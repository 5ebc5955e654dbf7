"""The master side of the swarm's statistics: merge, watch the workers, serve, summarise, judge.

On a master (and a local runner): merges every worker's `WorkerReport` delta (swarm/stats/wire.py)
into one `Aggregate`; watches Locust's heartbeat state and records every worker that goes
missing (or never sends its final report) as degraded, with the time, instead of waiting for
it; adds each report's CPU entries to a `ClientLoad` (swarm/stats/cpu.py: a stage in which a
worker averaged more than 90% of a core is client-bound, logged once, shown in the LLM tab and
listed in summary.json as `client_bound`) and, with --swarm-out, to DIR/client_cpu.jsonl; serves
/metrics on the web UI and on --prometheus-port; adds the LLM tab. With --abort-on, keeps the
recent deltas and ends the run when a condition holds over its window (swarm/stats/abort.py):
summary.json's `aborted` says why and the exit code is 3.

At `quitting`: waits up to FINAL_REPORT_WAIT_S (after --stop-timeout) for workers' final
reports, writes DIR/summary.json, prints one line per SLO and, when --slo is given, sets the
process exit code: 0 when every objective holds, 1 otherwise (Locust's own error exit is
overridden then: the objectives decide).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import gevent
from locust import log as locust_log
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING

from swarm.core.errors import EXIT_ABORTED, UsageError
from swarm.core.options import FINAL_REPORT_WAIT_S
from swarm.core.units import new_run_id, stage_name
from swarm.live import webui
from swarm.live.exporter import CONTENT_TYPE, ExportState, registry_for
from swarm.live.options import option
from swarm.live.replay import WORKLOAD as replay_workload
from swarm.live.series import LiveSeries, stage_markers
from swarm.live.shape import share_rate, stage_timeline
from swarm.live.state import swarm_state
from swarm.live.worker import WorkerStats, goodput_spec
from swarm.stats import abort, slo, summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.cpu import ClientLoad
from swarm.stats.summary import ClientBound, DegradedWorker, Summary, VerdictEntry
from swarm.stats.trace_replay import replay_lines
from swarm.stats.wire import WIRE_KEY, WorkerReport

logger = logging.getLogger(__name__)

TICK_S = 1.0  # bookkeeping: users, workers, degraded workers, rates, a local runner's delta
RATE_WINDOW_S = 10.0  # web UI "current" QPS and tok/s
SUMMARY_AFTER_STOP_S = 4.0  # write summary.json this long after a test stops, too
CLIENT_CPU_FILE = "client_cpu.jsonl"


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


class MasterStats:
    """The run's statistics as the master (or a local runner) sees them."""

    def __init__(self, environment: Any, runner: Any, role: str, local: WorkerStats | None = None) -> None:
        self.environment = environment
        self.runner = runner
        self.role = role  # "master" or "local"
        self.local = local  # a local runner's own WorkerStats, pulled every tick
        self.state = swarm_state(environment)
        out = option(environment, "swarm_out")
        self.out_dir = Path(out) if out else None
        self.run_id = option(environment, "run_id") or new_run_id()
        slo_text = option(environment, "slo")
        # --search: the objectives are the search's criterion, judged per stage (swarm/live/search.py)
        self.objectives = slo.parse(slo_text) if slo_text and not option(environment, "search") else None
        if option(environment, "search"):
            from swarm.live.search import search_spec

            search_spec(environment)  # bad --search options: one line and exit 2 before any user starts
        goodput = goodput_spec(environment)  # validated here: a malformed one exits 2 at start-up
        self.goodput_slo = goodput.text if goodput is not None else None
        abort_on = option(environment, "abort_on")  # --abort-on: the circuit breaker (swarm/stats/abort.py)
        self.breaker = abort.Breaker(abort.parse(abort_on)) if abort_on else None
        self.aborted: dict[str, Any] | None = None  # summary.json's `aborted` once a condition held
        self.aggregate = Aggregate()
        self.model_name: str | None = option(environment, "model")
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.stopped_s: float | None = None  # the stop began: the end of the load window
        self.max_users = 0
        self.max_workers = 0
        self.known_workers: dict[str, float] = {}  # id -> connected at
        self.last_report: dict[str, float] = {}
        self.worker_stopped: dict[str, bool] = {}
        self.internal_errors: set[str] = set()  # workers whose reports said they logged an exception
        self.degraded: dict[str, DegradedWorker] = {}
        self.verdicts: list[slo.Verdict] = []
        self.client_load = ClientLoad()
        self._flagged: set[int] = set()  # stages already logged as client-bound
        self._cpu_file: TextIO | None = None
        self._rate_history: deque[tuple[float, dict[str, tuple[int, int]]]] = deque()
        self._summary_writer: Any = None
        self._closed = False
        self.series = LiveSeries()  # the LLM tab's charts (swarm/live/series.py)
        self._charts = False  # a web UI shows them (headless: no series kept)
        self.in_flight: dict[str, int] = {}  # worker -> requests in flight at its last report
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stopping.add_listener(self._on_test_stopping)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.reset_stats.add_listener(self._on_reset_stats)
        if role == "master":
            ev.worker_report.add_listener(self._on_worker_report)
            # before Locust's own listener, which reads data["user_classes_count"] (see _complete_report)
            ev.worker_report._handlers.insert(0, self._complete_report)
            ev.worker_connect.add_listener(self._on_worker_connect)
        self._registry = registry_for(self.export_state)
        self._ticker = gevent.spawn(self._tick_forever)
        self._sigterm: Any = None
        if environment.shape_class is not None and option(environment, "headless"):
            # kept for the process's life: cancelling the last watcher restores the default, and a
            # SIGTERM during Locust's quit, before its own handler is in, killed the master without
            # a summary; after the shape, ours only lets the quit go on
            self._sigterm = gevent.signal_handler(signal.SIGTERM, self._on_sigterm_during_shape)

    def _on_sigterm_during_shape(self) -> None:
        """Locust 2.47 installs its SIGTERM handler only after a headless shape run (swarm/live/shape.py)
        has ended, so until then SIGTERM killed the master outright: no quit for the workers (they
        ran on for a minute), no summary.json. This ends the shape instead; Locust's own path then
        quits the workers, collects their last reports and writes everything."""
        shape = getattr(self.runner, "shape_greenlet", None)
        if shape is not None and not shape.dead:
            logger.info("swarm: got SIGTERM: ending the run")
            shape.kill(block=False)
            return
        if shape is not None or self.start_s is not None:
            # the run began and its shape has ended (its last worker quit, say; Locust may have
            # dropped the greenlet already): Locust's quit is under way and installs its own
            # handler next. Killing the process here lost the summary (swarm run ending a run whose
            # every worker had quit: master exit -15)
            logger.info("swarm: got SIGTERM as the run ends: the quit under way goes on")
            return
        self._sigterm.cancel()  # before the run started: what SIGTERM did before
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    # ---- reports in ------------------------------------------------------------------------
    def _on_worker_connect(self, client_id: str, **_: Any) -> None:
        self.known_workers.setdefault(client_id, time.time())

    def _complete_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        """A worker told to quit while still starting (its WorkerRunner waits for the master's ack,
        its message loop already running) sends a last report before Locust registered its own
        report listener: no `user_classes_count`. Locust's master handler then raises KeyError
        (Locust 2.47, runners.py `on_worker_report`) and the run exits 2. Seen with 24 workers on a
        starved 2-core machine, the last ones still starting when the run ended. Keep what the
        master last knew of that worker instead."""
        if "user_classes_count" not in data:
            client = self.runner.clients.get(client_id)
            data["user_classes_count"] = dict(getattr(client, "user_classes_count", None) or {})
            data.setdefault("user_count", sum(data["user_classes_count"].values()))

    def _on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(WIRE_KEY)
        if payload is None:
            return
        self.last_report[client_id] = time.time()
        self.known_workers.setdefault(client_id, time.time())
        lost = self.degraded.get(client_id)
        if lost is not None and "reconnected_at" not in lost:  # missing, not dead: its deltas count once
            lost["reconnected_at"] = _iso(time.time()) or ""
            logger.warning(
                "swarm: worker %s is back and reports again; nothing it sends is lost or counted twice",
                client_id,
            )
        self.merge_report(client_id, payload)

    def merge_report(self, client_id: str, payload: WorkerReport) -> None:
        """One worker's delta (or a local runner's own) into the run's statistics."""
        try:
            delta = Aggregate.from_wire(payload)
            self.aggregate.merge(delta)
        except (ValueError, KeyError, TypeError) as e:
            logger.error("swarm: ignoring a report from worker %s: %s", client_id, e)
            return
        if self._charts:
            self.series.add(delta)
        if self.breaker is not None:
            self.breaker.add(time.time(), delta)
        if isinstance(payload.get("in_flight"), int):
            self.in_flight[client_id] = payload["in_flight"]
        self.worker_stopped[client_id] = bool(payload.get("stopped"))
        if payload.get("internal_error") and client_id != "local":
            self.internal_errors.add(client_id)
        with contextlib.suppress(ValueError, TypeError):
            entries = payload.get("cpu") or []
            self.client_load.add(client_id, entries)
            self._write_cpu(client_id, entries)
        if not self.model_name and payload.get("model_name"):
            self.model_name = str(payload["model_name"])

    def _write_cpu(self, worker: str, entries: list[list[float]]) -> None:
        if self.out_dir is None or not entries or self._closed:
            return
        if self._cpu_file is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._cpu_file = open(self.out_dir / CLIENT_CPU_FILE, "a")  # noqa: SIM115 - closed in close()
        for line in ClientLoad.lines(worker, entries, time.time()):
            self._cpu_file.write(json.dumps(line) + "\n")
        self._cpu_file.flush()

    def _pull_local(self) -> None:
        if self.local is not None and not self._closed:
            self.merge_report("local", self.local.take_report())

    def current_model(self) -> str | None:
        """--model, else what the workers discovered from the target's /v1/models."""
        if self.local is not None:
            return self.model_name or self.local.model_name()
        return self.model_name

    # ---- degraded workers --------------------------------------------------------------------
    def _mark_degraded(self, worker: str, reason: str) -> None:
        if worker in self.degraded:
            return
        last = self.last_report.get(worker)
        entry: DegradedWorker = {
            "worker": worker,
            "detected_at": _iso(time.time()),
            "last_report_at": _iso(last),
            "reason": reason,
        }
        self.degraded[worker] = entry
        logger.warning(
            "swarm: run degraded: worker %s %s (last report %s); its unsent interval is lost",
            worker,
            reason,
            entry["last_report_at"],
        )

    def _check_workers(self) -> None:
        for client in list(self.runner.clients.values()):
            if client.state == STATE_MISSING:
                self._mark_degraded(client.id, "missed heartbeats")

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
            self._check_workers()
            share_rate(self.environment)  # open loop: a worker quit or went missing mid-stage
        for bound_stage, (worker, pct) in sorted(self.client_load.bound().items()):
            if bound_stage not in self._flagged:
                self._flagged.add(bound_stage)
                logger.warning(
                    "swarm: client-bound: %s needed %.0f%% of a core (CPU + waiting for one) in %s; "
                    "results not trustworthy (add workers or cores)",
                    worker,
                    pct,
                    stage_name(bound_stage),
                )
        counts: dict[str, tuple[int, int]] = {}
        for cell in self.aggregate:
            for key in (cell.workload, f"{cell.workload}/{cell.klass}", f"model:{cell.model}", "total"):
                r, t = counts.get(key, (0, 0))
                counts[key] = (r + cell.requests, t + cell.output_tokens)
                g, _ = counts.get(f"good:{key}", (0, 0))  # --goodput: good requests (the LLM tab's req/s)
                counts[f"good:{key}"] = (g + cell.goodput_met, 0)
        self._rate_history.append((now, counts))
        while len(self._rate_history) > 2 and self._rate_history[1][0] <= now - RATE_WINDOW_S:
            self._rate_history.popleft()
        if self._charts and self.start_s is not None and self.end_s is None and self.series.due(now):
            self.series.sample(now, self.current_rates(), self.in_flight_total(), self.runner.user_count)
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
        self.aborted = trip.entry(_iso(now))
        logger.error("swarm: %s: ending the run (--abort-on %s)", trip.reason, trip.condition.text)
        gevent.spawn(self._stop_run)

    def _stop_run(self) -> None:
        """End the test the way Locust ends one at -t; the stop goes on as any other: in-flight
        requests get --stop-timeout, then are recorded as cancelled. Headless with a load shape,
        Locust's main waits for the shape and then quits: ending the shape is the whole stop (a
        quit of our own beside it would stop the users twice, which Locust 2.47 refuses with an
        exception per user). Headless without one: quit; with a web UI: stop (the UI stays)."""
        shape = getattr(self.runner, "shape_greenlet", None)
        if not option(self.environment, "headless"):
            self.runner.stop()
        elif shape is not None and not shape.dead:
            shape.kill(block=False)
        else:
            self.runner.quit()

    def in_flight_total(self) -> int | None:
        """Requests in flight: the sum of every live worker's last count (None: none reported one)."""
        live = [
            n
            for w, n in self.in_flight.items()
            if w not in self.degraded or "reconnected_at" in self.degraded[w]
        ]
        return sum(live) if self.in_flight else None

    def current_rates(self) -> dict[str, tuple[float, float]]:
        """workload -> (requests/s, output tokens/s) over the last RATE_WINDOW_S seconds."""
        if len(self._rate_history) < 2:
            return {}
        (t0, c0), (t1, c1) = self._rate_history[0], self._rate_history[-1]
        dt = t1 - t0
        if dt <= 0:
            return {}
        return {
            k: ((r - c0.get(k, (0, 0))[0]) / dt, (t - c0.get(k, (0, 0))[1]) / dt) for k, (r, t) in c1.items()
        }

    @property
    def stage(self) -> int:
        return self.state.stage.index

    def _on_test_start(self, **_: Any) -> None:
        if self.end_s is not None:  # a new test in the same web UI session: start afresh
            self._pull_local()
            self.aggregate = Aggregate()
            self.degraded.clear()
            self.client_load = ClientLoad()
            self._flagged.clear()
            self.state.stage.timeline.clear()
            self.end_s = None
            self.series.clear()
            self.in_flight.clear()
        self.stopped_s = None
        self.start_s = time.time()
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
        if self.out_dir is not None:  # late deltas land in the final write at quit
            self._summary_writer = gevent.spawn_later(SUMMARY_AFTER_STOP_S, self._write_summary_quietly)

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
            degraded_workers=len(self.degraded),
            replay_late_rows=self._replay_late_rows(),
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
        timeline = stage_timeline(self.environment)
        s = summary.build(
            self.aggregate,
            run_id=self.run_id,
            model_name=self.current_model(),
            start_s=self.start_s,
            end_s=end,
            stopped_s=self.stopped_s,
            users=self.max_users,
            workers=self.max_workers if self.role == "master" else 1,
            degraded_workers=list(self.degraded.values()),
            stage_windows={k: (w.start_s, w.end_s) for k, w in windows.items()},
            goodput_slo=self.goodput_slo,
        )
        if timeline:
            s["stage_timeline"] = timeline  # type: ignore[typeddict-item]
            by_index = {t["index"]: t for t in timeline}
            for entry in s["stages"]:
                t = by_index.get(entry["stage"])
                if t is not None:
                    entry.update(
                        users=t["users"],
                        start_s=t["start_wall_s"],
                        end_s=t["end_wall_s"],
                        warmup_s=t["warmup_s"],
                        rate=t["rate"],
                    )
                    if t.get("ended_by"):
                        entry["ended_by"] = t["ended_by"]
                    if t.get("settled") is not None:  # the search's stages: steady before measured?
                        entry["settled"] = t["settled"]
        shares = {
            w.name: share
            for mix in self.state.mixes.values()
            for w, _ in mix.items
            if (share := getattr(w, "intended_prefix_share", None)) is not None
        }
        replay = self.state.replay.dispatcher if self.state.replay is not None else None
        if (
            replay is not None
        ):  # --trace-replay (swarm/live/replay.py): rows sent, re-assigned, lagging workers
            s["trace_replay"] = replay.summary()
            implied = s["trace_replay"]["implied_prefix_hit_rate"]
            if implied is not None:  # the hit rate the trace's hash ids imply
                shares[replay_workload] = implied
        if shares:  # what the workload meant the prefix cache to hit (the report sets the server's beside it)
            s["intended_prefix_share"] = shares
        bound = self.client_load.bound()
        if bound:
            s["client_bound"] = [
                ClientBound(stage=stage, worker=worker, cpu_percent=round(pct, 1))
                for stage, (worker, pct) in sorted(bound.items())
            ]
        if self.verdicts:
            s["slo"] = [
                VerdictEntry(
                    text=v.describe(),
                    ok=v.ok,
                    objective=v.objective.text,
                    workload=v.objective.workload,
                    metric=v.objective.metric,
                    value=v.value,
                )
                for v in self.verdicts
            ]
        if self.state.search is not None:
            s["search"] = self._search_with_stage_figures(s)
        if self.aborted is not None:
            s["aborted"] = self.aborted
        return s

    def _search_with_stage_figures(self, s: Summary) -> dict[str, Any]:
        """The search's result. The probes keep what the search judged live (a probe that ended
        before its QPS could be measured live takes its stage's QPS). The answer's QPS and TTFT p99
        stay those of the window its verdict was judged on: the stage's row in the table also
        counts requests that finished after the verdict, under the next stage's load, and could
        quote a figure that breaks the SLO the answer meets."""
        search = dict(self.state.search or {})
        stages = {e["stage"]: e["total"] for e in s["stages"]}
        search["probes"] = [
            p | {"qps": stages[p["stage"]]["qps"]} if p.get("qps") is None and p["stage"] in stages else p
            for p in search.get("probes") or []
        ]
        return search

    def _write_summary_quietly(self) -> None:
        try:
            assert self.out_dir is not None
            summary.write(self.build_summary(), self.out_dir / "summary.json")
        except Exception:
            logger.exception("swarm: could not write summary.json")

    # ---- the end ---------------------------------------------------------------------------
    def finish(self) -> None:
        """At quit: the last reports, the summary, the SLO verdicts and the exit code."""
        if self._closed:
            return
        if self.role == "master":
            self._collect_final_reports()
        elif self.runner.state in (STATE_SPAWNING, STATE_RUNNING):
            # A signal (SIGTERM, Ctrl-C) fires `quitting` before Locust stops the users: stop them
            # here, so the requests in flight finish (or are cancelled) and are in the summary.
            self.runner.stop()
        if self.start_s is not None and self.end_s is None:
            self._on_test_stop()
        if self._summary_writer is not None:
            self._summary_writer.kill(block=False)
        self._tick()
        if self.objectives is not None:
            self.verdicts = slo.evaluate(self.objectives, self.build_summary())
        final = self.build_summary()  # what summary.json holds, and what the lines below print
        if self.out_dir is not None:
            summary.write(final, self.out_dir / "summary.json")
        self.close()
        if self.state.replay is not None and self.state.replay.dispatcher is not None:
            self.state.replay.dispatcher.stop()
            for line in replay_lines(final):
                print(line, flush=True)
        for d in self.degraded.values():
            back = f", back at {d['reconnected_at']}" if d.get("reconnected_at") else ""
            print(
                f"swarm: run degraded: worker {d['worker']} {d['reason']} at {d['detected_at']} "
                f"(last report {d['last_report_at']}{back})",
                flush=True,
            )
        if self.objectives is not None:
            for v in self.verdicts:
                print(v.describe(), flush=True)
            code = 0 if all(v.ok for v in self.verdicts) else 1
            previous = self.environment.process_exit_code
            self.environment.process_exit_code = max(code, previous) if previous else code
        if self.state.search is not None:  # the search decides: 0 converged, 1 otherwise
            search = final.get("search") or self.state.search  # the headline with the table's figures
            print(f"swarm: {search['headline']}", flush=True)
            self.environment.process_exit_code = 0 if self.state.search["converged"] else 1
        if self.aborted is not None:  # the breaker ended the run: its own code, whatever the verdicts
            print(f"swarm: {self.aborted['reason']}", flush=True)
            self.environment.process_exit_code = EXIT_ABORTED
        if locust_log.unhandled_greenlet_exception or self.internal_errors:
            # Locust logs an exception raised in an event handler or greenlet and goes on (its exit
            # code would be 2, which the verdicts above replace): the figures may be wrong, so say so
            where = [f"worker {w}'s log" for w in sorted(self.internal_errors)]
            if locust_log.unhandled_greenlet_exception:
                where.append("the master's log" if self.role == "master" else "the log")
            print(
                "swarm: an internal error was logged during the run ('Uncaught exception' or "
                f"'Unhandled exception' in {', '.join(where)}): exit 2, the figures may be incomplete",
                flush=True,
            )
            self.environment.process_exit_code = 2

    def _collect_final_reports(self) -> None:
        """Take in the last deltas of workers that are still alive, then stop listening.

        Headless, Locust's master has already told the workers to quit and stopped its receiving
        greenlet (after only 0.5 s); after a signal, it has done neither yet. Either way, read the
        remaining reports here, and mark a worker that sends none in time as degraded.
        """
        runner = self.runner
        if len(runner.greenlet):  # still listening (SIGTERM / Ctrl-C path): let Locust quit first
            runner.quit()
        self._check_workers()
        waiting = {
            w
            for w in self.known_workers
            if (w not in self.degraded or self.degraded[w].get("reconnected_at"))
            and not self.worker_stopped.get(w)
        }
        # Workers let in-flight requests finish for up to --stop-timeout before their last report.
        deadline = time.monotonic() + FINAL_REPORT_WAIT_S + float(self.environment.stop_timeout or 0)
        while waiting and (left := deadline - time.monotonic()) > 0:
            received = None
            with gevent.Timeout(left, False):
                received = runner.server.recv_from_client()
            if received is None:
                break
            _, msg = received
            if msg.type == "stats":
                self.environment.events.worker_report.fire(client_id=msg.node_id, data=msg.data)
                if self.worker_stopped.get(msg.node_id):
                    waiting.discard(msg.node_id)
        for w in sorted(waiting):
            self._mark_degraded(w, "sent no final report")

    def close(self) -> None:
        self._closed = True
        self._ticker.kill(block=False)
        if self._cpu_file is not None:
            self._cpu_file.close()
            self._cpu_file = None

    # ---- serving ---------------------------------------------------------------------------
    def install_web_ui(self, web_ui: Any) -> None:
        from flask import Response
        from prometheus_client import generate_latest

        def metrics() -> Response:
            return Response(generate_latest(self._registry), mimetype=None, content_type=CONTENT_TYPE)

        web_ui.app.add_url_rule("/metrics", "swarm_metrics", metrics)
        if getattr(web_ui, "web_login", False):  # Locust's --web-login, made usable (swarm/live/webauth.py)
            from swarm.live import webauth

            webauth.install(web_ui)
        webui.install(web_ui, lambda: webui.rows(self.aggregate, self.current_rates(), self.client_status()))
        webui.install_charts(
            web_ui, lambda: self.series.to_json(stage_markers(stage_timeline(self.environment)))
        )
        self._charts = True

    def client_status(self) -> str:
        """The LLM tab's "Client" column: client-bound stages, or the busiest worker's CPU."""
        return webui.client_status(
            self.client_load.bound(),
            self.client_load.busiest(),
            multi_stage=bool(stage_timeline(self.environment)),
        )

    def start_prometheus_server(self, port: int) -> None:
        from prometheus_client import start_http_server

        try:
            start_http_server(port, registry=self._registry)
        except OSError as e:  # a busy port: whoever reads it would read another server's numbers
            raise UsageError(
                f"--prometheus-port {port}: cannot serve /metrics there ({e.strerror or e}): give a free port"
            ) from None
        logger.info("swarm: serving /metrics on port %d", port)
