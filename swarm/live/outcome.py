"""The run's end on the master: summary.json written, the closing lines printed, the exit code set.

Writes DIR/summary.json (atomically, swarm/stats/summary.py `write`; under `swarm run` the part
that swarm run completes into it, swarm/live/settings.py `summary_path`), prints one line per SLO and,
when --slo is given, sets the process exit code: 0 when every objective holds, 1 otherwise
(Locust's own error exit is overridden then: the objectives decide). --search decides instead
when given (0 converged, 1 otherwise); a tripped --abort-on gives EXIT_ABORTED whatever the
verdicts; an internal error logged anywhere gives 2 last of all, since the figures may be wrong.
Before the search and the breaker, a run whose every request sent went unanswered (cancelled at
the stop, timed out, never connected) fails with EXIT_FAILED and a line saying so: its table
would be all dashes and its exit 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Set
from pathlib import Path
from typing import Any

from swarm.core.errors import EXIT_ABORTED, EXIT_FAILED
from swarm.live import locust_fixes
from swarm.stats import slo, summary
from swarm.stats.reachability import no_answer_line
from swarm.stats.summary import Summary

logger = logging.getLogger(__name__)


def write_summary(s: Summary, path: Path) -> None:
    summary.write(s, path)


def write_summary_quietly(build: Callable[[], Summary], path: Path) -> None:
    """An interim summary (after the test stopped): a failure is logged, never raised."""
    try:
        write_summary(build(), path)
    except Exception:
        logger.exception("swarm: could not write summary.json")


def print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line, flush=True)


def judge_slos(environment: Any, verdicts: list[slo.Verdict]) -> None:
    """One line per objective; exit 0 when all hold, else 1 (kept above 1 if Locust's was higher)."""
    print_lines(v.describe() for v in verdicts)
    code = 0 if all(v.ok for v in verdicts) else 1
    previous = environment.process_exit_code
    environment.process_exit_code = max(code, previous) if previous else code


def judge_answers(environment: Any, total: Mapping[str, Any]) -> None:
    """A run in which the target answered no request fails (EXIT_FAILED, kept if higher)."""
    line = no_answer_line(total)
    if line is None:
        return
    print(line, flush=True)
    environment.process_exit_code = max(EXIT_FAILED, environment.process_exit_code or 0)


def judge_search(environment: Any, final: Summary, search: Mapping[str, Any]) -> None:
    """The search decides: its headline (with the table's figures), exit 0 converged, 1 otherwise."""
    shown = final.get("search") or search
    print(f"swarm: {shown['headline']}", flush=True)
    environment.process_exit_code = 0 if search["converged"] else 1


def judge_abort(environment: Any, aborted: Mapping[str, Any]) -> None:
    """The breaker ended the run: its reason, and its own code whatever the verdicts."""
    print(f"swarm: {aborted['reason']}", flush=True)
    environment.process_exit_code = EXIT_ABORTED


def judge_internal_errors(environment: Any, workers: Set[str], role: str) -> None:
    """Locust logs an exception raised in an event handler or greenlet and goes on (its exit code
    would be 2, which the verdicts replace): the figures may be wrong, so say so and exit 2."""
    logged_here = locust_fixes.internal_error_logged()
    if not (logged_here or workers):
        return
    where = [f"worker {w}'s log" for w in sorted(workers)]
    if logged_here:
        where.append("the master's log" if role == "master" else "the log")
    print(
        "swarm: an internal error was logged during the run ('Uncaught exception' or "
        f"'Unhandled exception' in {', '.join(where)}): exit 2, the figures may be incomplete",
        flush=True,
    )
    environment.process_exit_code = 2
