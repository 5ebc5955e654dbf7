"""`swarm run` while the run lasts: watch the master and its workers, and stop them the way
Locust stops a run.

The run ends when the master exits; it is stopped early when it outlives its budget (the load's
length, the stop timeout and the start-up) or when every worker has quit with an error. Ctrl-C
(or SIGTERM) stops it gracefully: the requests in flight may finish for up to --stop-timeout; a
second Ctrl-C cuts them now (each recorded as cancelled), a third stops waiting.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

from swarm.core.options import CUT_NOW_SIGNAL, FINAL_REPORT_WAIT_S
from swarm.orchestrate.plan import START_TIMEOUT_S, RunPlan
from swarm.orchestrate.processes import Processes, sigterm_as_interrupt

STOP_MARGIN_S = 15.0  # beyond those, for the master to write the summary on a busy machine
WORKER_EXIT_S = 10.0  # for the workers to leave once the master has ended
POLL_S = 0.5


def wait_for_master(plan: RunPlan, procs: Processes, master: subprocess.Popen, quit_early: set[str]) -> int:
    """Until the master exits (or is stopped: too late, or every worker gone); returns its exit
    code (1 when it has none). `quit_early` gets the workers that exited while the master ran."""
    deadline = time.monotonic() + plan.expected_s + plan.stop_timeout_s + 2 * START_TIMEOUT_S
    while master.poll() is None:
        quit_early.update(n for n, p in procs.named("worker-") if p.poll() is not None)
        if time.monotonic() > deadline:
            print("swarm: master did not finish in time; stopping it", file=sys.stderr)
            stop_gracefully(plan, procs)
            break
        if workers_gone(procs):
            print("swarm: every worker has quit; ending the run", file=sys.stderr)
            stop_gracefully(plan, procs)
            break
        try:  # back at once when the master exits (a sleep kept each run up to POLL_S longer)
            master.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
    if master.poll() is not None:
        # the master ended by itself: its workers are leaving too (told to, or gone already); a
        # worker whose quit reached the master just before its own exit is judged once it is out
        procs.wait_exit([n for n, _ in procs.named("worker-")], WORKER_EXIT_S)
        left_on_their_own(procs, quit_early)
    return master.poll() if master.poll() is not None else 1


# Locust 2.47 (locust/runners.py `WorkerRunner.worker`) logs this when the master tells a worker to
# quit, which it does at every run's end; a worker that left on its own never got that far.
TOLD_TO_QUIT = "Got quit message from master"


def left_on_their_own(procs: Processes, quit_early: set[str]) -> None:
    """Once the master has ended by itself: `quit_early` made exact from the workers' logs. The
    loop above sees a worker leave only if it looks between that worker's exit and the master's
    (the master ends as soon as its last worker has quit: swarm/live/locust_fixes.py `quit_once`;
    Locust's own quit slept 1.5 s first), and a worker that left at the run's end, told to by the
    master, can exit in that moment too. A worker's log says which it was: told (not early) or not
    (early), however close the exits were; the workers have had WORKER_EXIT_S to leave before this
    is read (the master can end while a worker that quit on its own is still exiting). When every
    worker left on its own, one with an error, it is said as the loop says it."""
    seen = set(quit_early)
    for name, p in procs.named("worker-"):
        log = procs.log_tail(name, LOG_READ_CHARS) if p.poll() is not None else ""
        if "/INFO/" not in log:  # still running, or logging above INFO: the loop's view stands
            continue
        if TOLD_TO_QUIT in log:
            quit_early.discard(name)
        else:
            quit_early.add(name)
    names = {n for n, _ in procs.named("worker-")}
    if quit_early - seen and names <= quit_early and workers_gone(procs):
        print("swarm: every worker has quit; the run ended", file=sys.stderr)


LOG_READ_CHARS = 200_000  # of a worker's log's end: only a few lines follow its quit line


def interrupted(plan: RunPlan, procs: Processes) -> None:
    """Ctrl-C (or SIGTERM): said, and the run stopped gracefully once its master is started (the
    run's exit code is then 130)."""
    if procs.get("master") is None:
        print("swarm: interrupted before the run began; stopping", file=sys.stderr)
    else:
        print(
            f"swarm: interrupted: stopping the run; requests in flight may finish for up to "
            f"{plan.stop_timeout_s} s (Ctrl-C again cuts them now, recorded as cancelled)",
            file=sys.stderr,
        )
        stop_gracefully(plan, procs)


def workers_gone(procs: Processes) -> bool:
    """Every worker has exited while the master still runs, one at least with an error (e.g. each
    refused its options at start: exit 2 with one line): nothing is left to load the server. (At a
    run's normal end the workers leave first too, with exit code 0, on the master's quit.)"""
    codes = [p.poll() for _, p in procs.named("worker-")]
    return bool(codes) and None not in codes and any(code != 0 for code in codes)


def stop_gracefully(plan: RunPlan, procs: Processes) -> None:
    """End the run the way Locust ends it: SIGTERM to the master, which stops its workers; they let
    their requests in flight finish for up to --stop-timeout, send their last reports, and the
    master writes the summary. The server stays up meanwhile. A second Ctrl-C (or SIGTERM) cuts
    the requests still in flight now (each recorded as `cancelled`), a third stops waiting."""
    procs.signal("master", signal.SIGTERM)
    budget = stop_budget_s(plan)
    try:
        with sigterm_as_interrupt():
            if procs.wait_exit(["master"], budget):
                return
            print(f"swarm: the master did not end within {budget} s of the stop", file=sys.stderr)
    except KeyboardInterrupt:
        print("swarm: cutting the requests in flight now", file=sys.stderr)
    for name, _ in procs.named("worker-"):
        procs.signal(name, getattr(signal, CUT_NOW_SIGNAL))
    try:
        with sigterm_as_interrupt():
            procs.wait_exit(["master"], FINAL_REPORT_WAIT_S + STOP_MARGIN_S)
    except KeyboardInterrupt:
        print("swarm: stopping every process now", file=sys.stderr)


def stop_budget_s(plan: RunPlan) -> float:
    """How long a stopped master may take to end: the requests' stop timeout, the workers' last
    reports and a margin for writing the summary."""
    return plan.stop_timeout_s + FINAL_REPORT_WAIT_S + STOP_MARGIN_S


def worker_failures(procs: Processes, quit_early: set[str]) -> list[tuple[str, int, str]]:
    """Workers that exited with an error while the master still ran (not at the run's end, where a
    worker's exit code reflects its requests' failures): name, exit code and the last line of its
    log (its one-line reason)."""
    failed = []
    for name, p in procs.named("worker-"):
        code = p.poll()
        if code is not None and code > 0 and name in quit_early:  # (killed by a signal: "degraded")
            failed.append((name, code, reason_in_log(procs.log_tail(name))))
    return failed


LOG_PREFIX = re.compile(r"^\[[^\]]*\] [^/\s]+/(?:ERROR|CRITICAL)/[\w.]+: ")


def reason_in_log(text: str) -> str:
    """A process's one-line reason for quitting: its last error line (Locust's log prefix cut off),
    else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if LOG_PREFIX.match(line) or " error: " in line or line.startswith("Traceback"):
            return LOG_PREFIX.sub("", line)
    return lines[-1] if lines else "no output"
