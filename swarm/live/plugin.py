"""Locust glue for the swarm's own statistics: import it from a locustfile (swarm/live/user.py does).

Registers, Locust style, at import time:
- options (`init_command_line_parser`): `--swarm-out DIR` (summary.json from the master or local
  runner; per-request records from each worker/local process under DIR/records),
  `--prometheus-port PORT` (master/local: also serve /metrics there; needed when headless),
  `--slo SPEC` (see swarm/stats/slo.py), `--run-id ID` (labels and summary; default generated);
- on `init`, a `SwarmPlugin` for the environment, by role:
  - worker: `swarm.core.events.llm_request` -> a delta Aggregate, shipped in every
    `report_to_master` as `data["swarm"]` (the Aggregate wire dict plus `stopped`,
    `model_name` and `cpu`: [[stage, CPU seconds, wall seconds]] since the last report, from
    `time.process_time()` sampled every second), so a worker that dies loses at most its last
    unsent interval;
  - master: merges `worker_report`s; watches Locust's heartbeat state and records every worker
    that goes missing (or never sends its final report) as degraded, with the time, instead of
    waiting for it; serves /metrics on the web UI and on --prometheus-port; adds the LLM tab;
  - local: adds records directly and does both of the above.
  Client CPU (master/local): a stage in which a worker process averaged more than 90% of a core
  (`CLIENT_CPU_MAX`, as swarm/analysis/diagnosis.py) is client-bound: the swarm measured its own
  queueing there. Each such stage is logged once, named in the LLM tab's "Client" column
  ("client-bound: results not trustworthy") and listed in summary.json as `client_bound`
  ([{stage, worker, cpu_percent}]; absent when none).
  At `quitting` (master/local): waits up to FINAL_REPORT_WAIT_S for workers' final reports,
  writes DIR/summary.json, prints one line per SLO and, when --slo is given, sets the process
  exit code: 0 when every objective holds, 1 otherwise (Locust's own error exit is overridden
  then: the objectives decide). A malformed --slo prints one line and exits 2 at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import sys
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from locust import events
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from swarm.analysis.diagnosis import CLIENT_CPU_MAX
from swarm.core import events as swarm_events
from swarm.core.errors import UsageError
from swarm.core.records import RequestRecord
from swarm.live import webui
from swarm.live.exporter import CONTENT_TYPE, ExportState, registry_for
from swarm.live.recorder import RecordWriter
from swarm.live.shape import stage_timeline
from swarm.stats import slo, summary
from swarm.stats.aggregate import Aggregate

logger = logging.getLogger(__name__)

WIRE_KEY = "swarm"
TICK_S = 1.0  # master/local bookkeeping: users, workers, stage windows, degraded workers, rates
RATE_WINDOW_S = 10.0  # web UI "current" QPS and tok/s
FINAL_REPORT_WAIT_S = (
    5.0  # master at quit: wait this long (after --stop-timeout) for the workers' last deltas
)
SUMMARY_AFTER_STOP_S = 4.0  # master/local: write summary.json this long after a test stops, too
CPU_SAMPLE_S = 1.0  # worker/local: process CPU time sampled this often, per stage
CPU_MIN_WALL_S = 2.0  # a (stage, worker) needs this much sampled time before it can be flagged
# Above this mean CPU % a worker measures its own queueing; $SWARM_CLIENT_CPU_MAX sets another bar
# (a stricter one, or a low one to see the flag on a machine too busy to give a worker 90% of a core).
CLIENT_CPU_LIMIT = float(os.environ.get("SWARM_CLIENT_CPU_MAX") or CLIENT_CPU_MAX)


class CpuMeter:
    """This process's CPU time per load stage, from `time.process_time()` (all threads)."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), time.process_time())
        self.pending: dict[int, list[float]] = {}  # stage -> [cpu_s, wall_s] since the last take()

    def sample(self, stage: int | None) -> None:
        """Count the time since the last sample to `stage` (None: not running, not counted)."""
        now = (time.monotonic(), time.process_time())
        wall, cpu = now[0] - self._last[0], now[1] - self._last[1]
        self._last = now
        if stage is not None and wall > 0:
            acc = self.pending.setdefault(stage, [0.0, 0.0])
            acc[0] += cpu
            acc[1] += wall

    def take(self) -> list[list[float]]:
        """[[stage, cpu_s, wall_s]] since the last take (msgpack-able), and start afresh."""
        out = [[stage, cpu, wall] for stage, (cpu, wall) in self.pending.items()]
        self.pending = {}
        return out


class ClientLoad:
    """Master/local: CPU and wall seconds per (stage, worker); which stages were client-bound."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[int, str], list[float]] = {}

    def add(self, worker: str, entries: Any) -> None:
        for stage, cpu, wall in entries or ():
            acc = self.seconds.setdefault((int(stage), str(worker)), [0.0, 0.0])
            acc[0] += float(cpu)
            acc[1] += float(wall)

    def bound(self) -> dict[int, tuple[str, float]]:
        """stage -> (worker, mean CPU %) of its busiest worker, for stages where one averaged above
        CLIENT_CPU_LIMIT (90%) over at least CPU_MIN_WALL_S."""
        out: dict[int, tuple[str, float]] = {}
        for (stage, worker), (cpu, wall) in self.seconds.items():
            if wall < CPU_MIN_WALL_S:
                continue
            pct = 100.0 * cpu / wall
            if pct > CLIENT_CPU_LIMIT and (stage not in out or pct > out[stage][1]):
                out[stage] = (worker, pct)
        return out

    def busiest(self) -> float | None:
        """The highest mean CPU % of any (stage, worker) with enough time, or None."""
        pcts = [100.0 * cpu / wall for cpu, wall in self.seconds.values() if wall >= CPU_MIN_WALL_S]
        return max(pcts, default=None)


@events.init_command_line_parser.add_listener
def add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("llm-swarm statistics")
    group.add_argument(
        "--swarm-out",
        metavar="DIR",
        default=None,
        env_var="SWARM_OUT",
        help="write summary.json (master/local) and per-request records (workers) under DIR",
    )
    group.add_argument(
        "--prometheus-port",
        metavar="PORT",
        type=int,
        default=None,
        env_var="SWARM_PROMETHEUS_PORT",
        help="serve the master's /metrics on this port (the web UI serves it at /metrics too)",
    )
    group.add_argument(
        "--slo",
        metavar="SPEC",
        default=None,
        env_var="SWARM_SLO",
        help='objectives checked at the end, e.g. "ttft_p99<=800ms,e2e_p99<=5s,error_rate<=1%%"; '
        "the exit code is non-zero when one fails",
    )
    group.add_argument(
        "--run-id",
        metavar="ID",
        default=None,
        env_var="SWARM_RUN_ID",
        help="run id for /metrics labels and summary.json (default: generated)",
    )


@events.init.add_listener
def _on_init(environment: Any, runner: Any = None, web_ui: Any = None, **_: Any) -> None:
    runner = runner or environment.runner
    if runner is None:
        return
    try:
        environment.swarm_plugin = SwarmPlugin(environment, runner, web_ui)
    except UsageError as e:
        print(f"swarm: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _option(environment: Any, name: str) -> Any:
    return getattr(environment.parsed_options, name, None) if environment.parsed_options is not None else None


class SwarmPlugin:
    """The swarm's statistics for one Locust environment (one per process)."""

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
        out = _option(environment, "swarm_out")
        self.out_dir = Path(out) if out else None
        self.run_id = _option(environment, "run_id") or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        slo_text = _option(environment, "slo")
        self.objectives = slo.parse(slo_text) if slo_text and self.role != "worker" else None
        self.aggregate = Aggregate()  # master/local: everything so far; worker: the unsent delta
        self.model_name: str | None = _option(environment, "model")
        self.stopped = False  # worker: no more records until the next test_start
        self._writer: Any = None
        self._closed = False
        self._quitting: Event | None = None  # set once the first `quitting` call is done
        self.cpu = CpuMeter()  # worker/local: this process's CPU per stage
        self.client_load = ClientLoad()  # master/local: every worker's (local: this process's)
        self._flagged: set[int] = set()  # stages already logged as client-bound
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.quitting.add_listener(self._on_quitting)
        ev.reset_stats.add_listener(self._on_reset_stats)
        swarm_events.llm_request.add_listener(self._on_record)
        if self.role == "worker":
            ev.report_to_master.add_listener(self._on_report_to_master)
            self._ticker = gevent.spawn(self._cpu_forever)
            return
        # master / local
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.max_users = 0
        self.max_workers = 0
        self.stage = 0
        self.stage_windows: dict[int, list[float]] = {}
        self.known_workers: dict[str, float] = {}  # id -> connected at
        self.last_report: dict[str, float] = {}
        self.worker_stopped: dict[str, bool] = {}
        self.degraded: dict[str, dict[str, Any]] = {}
        self.verdicts: list[slo.Verdict] = []
        self._rate_history: deque[tuple[float, dict[str, tuple[int, int]]]] = deque()
        self._summary_writer: Any = None
        if self.role == "master":
            ev.worker_report.add_listener(self._on_worker_report)
            ev.worker_connect.add_listener(self._on_worker_connect)
        self._registry = registry_for(self.export_state)
        if web_ui is not None:
            self._install_web_ui(web_ui)
        port = _option(environment, "prometheus_port")
        if port:
            self._start_prometheus_server(int(port))
        self._ticker = gevent.spawn(self._tick_forever)
        self._sigterm: Any = None
        if environment.shape_class is not None and _option(environment, "headless"):
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
        self._sigterm.cancel()  # before the run started: what SIGTERM did before
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    # ---- records (worker/local) -------------------------------------------------------------
    def _on_record(self, record: RequestRecord, **_: Any) -> None:
        if self._closed or self.role == "master":
            return
        self.aggregate.add(record)
        if self.out_dir is not None:
            self._ensure_writer().add(record)

    def _ensure_writer(self) -> RecordWriter:
        """Created at test start: its one-off set-up (~0.3 s) must not stall requests in flight."""
        if self._writer is None:
            part = f"{self.role}-{os.getpid()}-{secrets.token_hex(3)}"
            self._writer = RecordWriter(self.out_dir / "records", part, background=True)
        return self._writer

    def _on_report_to_master(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        wire = self.aggregate.take_delta().to_wire()
        self.cpu.sample(self._running_stage())
        data[WIRE_KEY] = {
            **wire,
            "stopped": self.stopped,
            "model_name": self.current_model(),
            "cpu": self.cpu.take(),
        }

    def _running_stage(self) -> int | None:
        """The current stage while users run (worker: between test start and stop), else None."""
        if self.role == "worker":
            return (
                None
                if self.stopped or self.runner.user_count == 0
                else int(getattr(self.environment, "swarm_stage", 0) or 0)
            )
        running = self.start_s is not None and self.end_s is None
        return int(getattr(self.environment, "swarm_stage", 0) or 0) if running else None

    def _cpu_forever(self) -> None:
        while True:
            gevent.sleep(CPU_SAMPLE_S)
            self.cpu.sample(self._running_stage())

    def current_model(self) -> str | None:
        """--model, else what the user discovered from the target's /v1/models (swarm/live/user.py)."""
        target = getattr(self.environment, "swarm_target", None)
        return self.model_name or getattr(target, "model", None)

    # ---- master ----------------------------------------------------------------------------
    def _on_worker_connect(self, client_id: str, **_: Any) -> None:
        self.known_workers.setdefault(client_id, time.time())

    def _on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(WIRE_KEY)
        if payload is None:
            return
        self.last_report[client_id] = time.time()
        self.known_workers.setdefault(client_id, time.time())
        lost = self.degraded.get(client_id)
        if lost is not None and "reconnected_at" not in lost:  # missing, not dead: its deltas count once
            lost["reconnected_at"] = _iso(time.time())
            logger.warning(
                "swarm: worker %s is back and reports again; nothing it sends is lost or counted twice",
                client_id,
            )
        try:
            self.aggregate.merge(Aggregate.from_wire(payload))
        except (ValueError, KeyError, TypeError) as e:
            logger.error("swarm: ignoring a report from worker %s: %s", client_id, e)
            return
        self.worker_stopped[client_id] = bool(payload.get("stopped"))
        with contextlib.suppress(ValueError, TypeError):
            self.client_load.add(client_id, payload.get("cpu"))
        if not self.model_name and payload.get("model_name"):
            self.model_name = str(payload["model_name"])

    def _mark_degraded(self, worker: str, reason: str) -> None:
        if worker in self.degraded:
            return
        last = self.last_report.get(worker)
        entry = {
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

    # ---- master / local bookkeeping -----------------------------------------------------------
    def _tick_forever(self) -> None:
        while True:
            try:
                self._tick()
            except Exception:  # bookkeeping must never take the run down
                logger.exception("swarm: bookkeeping failed")
            gevent.sleep(TICK_S)

    def _tick(self) -> None:
        now = time.time()
        running = self.start_s is not None and self.end_s is None
        self.max_users = max(self.max_users, self.runner.user_count)
        if self.role == "master":
            self.max_workers = max(self.max_workers, self.runner.worker_count)
            self._check_workers()
        stage = int(getattr(self.environment, "swarm_stage", 0) or 0)
        if running:
            if stage != self.stage and self.stage in self.stage_windows:
                self.stage_windows[self.stage][1] = now
            self.stage_windows.setdefault(stage, [now, now])[1] = now
        self.stage = stage
        if self.role == "local":
            self.cpu.sample(stage if running else None)
            self.client_load.add("local", self.cpu.take())
        for bound_stage, (worker, pct) in sorted(self.client_load.bound().items()):
            if bound_stage not in self._flagged:
                self._flagged.add(bound_stage)
                logger.warning(
                    "swarm: client-bound: %s averaged %.0f%% CPU in stage %d; results not trustworthy "
                    "(add workers or cores)",
                    worker,
                    pct,
                    bound_stage,
                )
        counts: dict[str, tuple[int, int]] = {}
        for cell in self.aggregate:
            for key in (cell.workload, "total"):
                r, t = counts.get(key, (0, 0))
                counts[key] = (r + cell.requests, t + cell.output_tokens)
        self._rate_history.append((now, counts))
        while len(self._rate_history) > 2 and self._rate_history[1][0] <= now - RATE_WINDOW_S:
            self._rate_history.popleft()

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

    def _on_test_start(self, **_: Any) -> None:
        self.stopped = False
        if self.role != "master" and self.out_dir is None:  # a worker learns --swarm-out from the master
            out = _option(self.environment, "swarm_out")
            self.out_dir = Path(out) if out else None
        if self.role != "master" and self.out_dir is not None:
            self._ensure_writer()
        if self.role == "worker":
            return
        if self.end_s is not None:  # a new test in the same web UI session: start afresh
            self.aggregate = Aggregate()
            self.stage_windows.clear()
            self.degraded.clear()
            self.client_load = ClientLoad()
            self._flagged.clear()
            self.end_s = None
        self.start_s = time.time()
        shape = getattr(self.runner, "shape_greenlet", None)
        if self._sigterm is not None and shape is not None:  # Locust's handler takes over after the shape
            shape.link(lambda _: self._sigterm.cancel())

    def _on_test_stop(self, **_: Any) -> None:
        self.stopped = True
        if self.role == "worker" or self.start_s is None:
            return
        self.end_s = time.time()
        if self.stage in self.stage_windows:
            self.stage_windows[self.stage][1] = self.end_s
        if self.out_dir is not None:  # late deltas land in the final write at quit
            self._summary_writer = gevent.spawn_later(SUMMARY_AFTER_STOP_S, self._write_summary_quietly)

    def _on_reset_stats(self, **_: Any) -> None:
        self.aggregate = Aggregate()

    def export_state(self) -> ExportState:
        return ExportState(
            aggregate=self.aggregate,
            run_id=self.run_id,
            model_name=self.current_model() or "unknown",
            users=self.runner.user_count,
            workers=self.runner.worker_count if self.role == "master" else 1,
            stage=self.stage,
            degraded_workers=len(self.degraded),
        )

    def build_summary(self) -> dict[str, Any]:
        timeline = stage_timeline(self.environment)
        windows = {k: (v[0], v[1]) for k, v in self.stage_windows.items()}
        end = self.end_s if self.end_s is not None else time.time()
        for t in timeline:  # the shape's own stage boundaries are exact; the 1 s tick's are not
            windows[t["index"]] = (t["start_wall_s"], t["end_wall_s"] or end)
        s = summary.build(
            self.aggregate,
            run_id=self.run_id,
            model_name=self.current_model(),
            start_s=self.start_s,
            end_s=self.end_s
            if self.end_s is not None
            else (time.time() if self.start_s is not None else None),
            users=self.max_users,
            workers=self.max_workers if self.role == "master" else 1,
            degraded_workers=list(self.degraded.values()),
            stage_windows=windows,
        )
        if timeline:
            s["stage_timeline"] = timeline
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
        bound = self.client_load.bound()
        if bound:
            s["client_bound"] = [
                {"stage": stage, "worker": worker, "cpu_percent": round(pct, 1)}
                for stage, (worker, pct) in sorted(bound.items())
            ]
        if self.verdicts:
            s["slo"] = [
                {
                    "text": v.describe(),
                    "ok": v.ok,
                    "objective": v.objective.text,
                    "workload": v.objective.workload,
                    "metric": v.objective.metric,
                    "value": v.value,
                }
                for v in self.verdicts
            ]
        return s

    def _write_summary_quietly(self) -> None:
        try:
            summary.write(self.build_summary(), self.out_dir / "summary.json")
        except Exception:
            logger.exception("swarm: could not write summary.json")

    # ---- the end ---------------------------------------------------------------------------
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
            self._quit()
        finally:
            self._quitting.set()

    def _quit(self) -> None:
        if self._closed:
            return
        if self.role == "worker":
            self._hand_over_last_delta()
            self._close()
            return
        if self.role == "master":
            self._collect_final_reports()
        if self.start_s is not None and self.end_s is None:
            self._on_test_stop()
        if self._summary_writer is not None:
            self._summary_writer.kill(block=False)
        self._tick()
        self._close()
        if self.objectives is not None:
            self.verdicts = slo.evaluate(self.objectives, self.build_summary())
        if self.out_dir is not None:
            summary.write(self.build_summary(), self.out_dir / "summary.json")
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

    def _hand_over_last_delta(self) -> None:
        """Worker quitting on its own (SIGTERM, Ctrl-C) rather than on the master's quit: stop the
        users and send what they produced since the last report, so an interrupted run loses nothing.

        From here on the worker takes no new users: when another worker quits first, the master
        hands its users to the workers left, and users spawned after this last report would send
        requests that no report ever carries (seen as a few requests missing after a Ctrl-C)."""
        runner = self.runner
        handle = runner.handle_message

        def no_more_spawns(msg: Any) -> None:
            if msg.type != "spawn":
                handle(msg)

        runner.handle_message = no_more_spawns  # the worker's receive loop calls self.handle_message
        with contextlib.suppress(Exception):
            if not self.stopped:
                self.runner.stop()
            if self.aggregate:
                self.runner._send_stats()  # fires report_to_master, as Locust's own reporter does

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

    def _close(self) -> None:
        self._closed = True
        with contextlib.suppress(ValueError):
            swarm_events.llm_request.remove_listener(self._on_record)
        ticker = getattr(self, "_ticker", None)
        if ticker is not None:
            ticker.kill(block=False)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ---- serving ---------------------------------------------------------------------------
    def _install_web_ui(self, web_ui: Any) -> None:
        from flask import Response
        from prometheus_client import generate_latest

        def metrics() -> Response:
            return Response(generate_latest(self._registry), mimetype=None, content_type=CONTENT_TYPE)

        web_ui.app.add_url_rule("/metrics", "swarm_metrics", metrics)
        if getattr(web_ui, "web_login", False):  # Locust's --web-login, made usable (swarm/live/webauth.py)
            from swarm.live import webauth

            webauth.install(web_ui)
        webui.install(web_ui, lambda: webui.rows(self.aggregate, self.current_rates(), self.client_status()))

    def client_status(self) -> str:
        """The LLM tab's "Client" column: client-bound stages, or the busiest worker's CPU."""
        return webui.client_status(
            self.client_load.bound(),
            self.client_load.busiest(),
            multi_stage=bool(stage_timeline(self.environment)),
        )

    def _start_prometheus_server(self, port: int) -> None:
        from prometheus_client import start_http_server

        try:
            start_http_server(port, registry=self._registry)
            logger.info("swarm: serving /metrics on port %d", port)
        except OSError as e:
            logger.error("swarm: cannot serve /metrics on port %d: %s", port, e)
