"""The master's watch over its workers: who is connected, who went missing, who sent its last report.

Watches Locust's heartbeat state and records every worker that goes missing (or never sends its
final report) as degraded, with the time, instead of waiting for it; a missing worker that
reports again is marked `reconnected_at` (its deltas still count once). Keeps each worker's last
count of requests in flight, whether its last report was its final one (`stopped`), and which
workers said they logged an internal error. At quit, `collect_final_reports` reads the last
reports Locust's master no longer waits for.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust.runners import STATE_MISSING

from swarm.core.options import FINAL_REPORT_WAIT_S
from swarm.live import locust_fixes
from swarm.stats.summary import DegradedWorker, iso_time
from swarm.stats.wire import WorkerReport

logger = logging.getLogger(__name__)


class WorkerHealth:
    """Every worker's standing, as the master saw it."""

    def __init__(self) -> None:
        self.known: dict[str, float] = {}  # id -> connected at
        self.last_report: dict[str, float] = {}
        self.stopped: dict[str, bool] = {}  # its last report was its final one
        self.internal_errors: set[str] = set()  # workers whose reports said they logged an exception
        self.degraded: dict[str, DegradedWorker] = {}
        self.in_flight: dict[str, int] = {}  # worker -> requests in flight at its last report

    def clear(self) -> None:
        """A new test in the same web UI session: nobody is degraded, nothing in flight."""
        self.degraded.clear()
        self.in_flight.clear()

    def connected(self, worker: str) -> None:
        self.known.setdefault(worker, time.time())

    def reported(self, worker: str) -> None:
        """A report with the swarm's payload came in: the worker is alive (back, if it was missing)."""
        self.last_report[worker] = time.time()
        self.known.setdefault(worker, time.time())
        lost = self.degraded.get(worker)
        if lost is not None and "reconnected_at" not in lost:  # missing, not dead: its deltas count once
            lost["reconnected_at"] = iso_time(time.time()) or ""
            logger.warning(
                "swarm: worker %s is back and reports again; nothing it sends is lost or counted twice",
                worker,
            )

    def note(self, worker: str, payload: WorkerReport) -> None:
        """What a merged report says of its worker: in flight, final or not, an internal error."""
        if isinstance(payload.get("in_flight"), int):
            self.in_flight[worker] = payload["in_flight"]
        self.stopped[worker] = bool(payload.get("stopped"))
        if payload.get("internal_error") and worker != "local":
            self.internal_errors.add(worker)

    def alive(self, worker: str) -> bool:
        """Not degraded, or back since."""
        return worker not in self.degraded or "reconnected_at" in self.degraded[worker]

    def mark_degraded(self, worker: str, reason: str) -> None:
        if worker in self.degraded:
            return
        entry: DegradedWorker = {
            "worker": worker,
            "detected_at": iso_time(time.time()),
            "last_report_at": iso_time(self.last_report.get(worker)),
            "reason": reason,
        }
        self.degraded[worker] = entry
        logger.warning(
            "swarm: run degraded: worker %s %s (last report %s); its unsent interval is lost",
            worker,
            reason,
            entry["last_report_at"],
        )

    def check(self, runner: Any) -> None:
        """Locust's heartbeat says missing: degraded."""
        for client in list(runner.clients.values()):
            if client.state == STATE_MISSING:
                self.mark_degraded(client.id, "missed heartbeats")

    def in_flight_total(self) -> int | None:
        """Requests in flight: the sum of every live worker's last count (None: none reported one)."""
        live = [n for w, n in self.in_flight.items() if self.alive(w)]
        return sum(live) if self.in_flight else None

    def awaiting_final(self) -> set[str]:
        """The live workers whose final report has not come yet."""
        return {
            w
            for w in self.known
            if (w not in self.degraded or self.degraded[w].get("reconnected_at")) and not self.stopped.get(w)
        }

    def lines(self) -> list[str]:
        """One line per degraded worker, for the end of the run."""
        out = []
        for d in self.degraded.values():
            back = f", back at {d['reconnected_at']}" if d.get("reconnected_at") else ""
            out.append(
                f"swarm: run degraded: worker {d['worker']} {d['reason']} at {d['detected_at']} "
                f"(last report {d['last_report_at']}{back})"
            )
        return out


def collect_final_reports(environment: Any, runner: Any, health: WorkerHealth) -> None:
    """Take in the last deltas of workers that are still alive, then stop listening.

    Headless, Locust's master has already told the workers to quit and stopped its receiving
    greenlet (after only 0.5 s); after a signal, it has done neither yet. Either way, read the
    remaining reports here, and mark a worker that sends none in time as degraded.
    """
    if locust_fixes.master_receiving(
        runner
    ):  # still listening (SIGTERM / Ctrl-C path): let Locust quit first
        runner.quit()
    health.check(runner)
    waiting = health.awaiting_final()
    # Workers let in-flight requests finish for up to --stop-timeout before their last report.
    deadline = time.monotonic() + FINAL_REPORT_WAIT_S + float(environment.stop_timeout or 0)
    while waiting and (left := deadline - time.monotonic()) > 0:
        received = locust_fixes.receive_message(runner, left)
        if received is None:
            break
        node_id, kind, data = received
        if kind == "stats":
            environment.events.worker_report.fire(client_id=node_id, data=data)
            if health.stopped.get(node_id):
                waiting.discard(node_id)
    for w in sorted(waiting):
        health.mark_degraded(w, "sent no final report")
