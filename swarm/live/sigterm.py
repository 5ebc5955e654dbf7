"""SIGTERM on a headless master with a load shape, before Locust's own handler is in.

Locust installs its SIGTERM handler only after a headless shape run has ended (see
swarm/live/locust_fixes.py `watch_sigterm_before_locust`), so until then SIGTERM killed the
master outright: no quit for the workers (they ran on for a minute), no summary.json. The
watcher here ends the shape instead; Locust's own path then quits the workers, collects their
last reports and writes everything. It is kept for the process's life: cancelling the last
watcher restores the default disposition, and a SIGTERM during Locust's quit, before its own
handler is in, killed the master without a summary; after the shape, ours only lets the quit go on.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from swarm.live import locust_fixes
from swarm.live.state import run_settings

logger = logging.getLogger(__name__)


class ShapeSigterm:
    """The watcher; `began()` says whether the run's test has started."""

    def __init__(self, runner: Any, began: Callable[[], bool]) -> None:
        self.runner = runner
        self.began = began
        self.watcher = locust_fixes.watch_sigterm_before_locust(self.on_sigterm)

    def on_sigterm(self) -> None:
        """Shape running: end it. Run begun and its shape ended (its last worker quit, say; Locust
        may have dropped the greenlet already): Locust's quit is under way and installs its own
        handler next, so let it go on (killing the process here lost the summary: swarm run ending
        a run whose every worker had quit, master exit -15). Before the run: what SIGTERM did before."""
        shape = locust_fixes.shape_greenlet(self.runner)
        if shape is not None and not shape.dead:
            logger.info("swarm: got SIGTERM: ending the run")
            shape.kill(block=False)
            return
        if shape is not None or self.began():
            logger.info("swarm: got SIGTERM as the run ends: the quit under way goes on")
            return
        self.watcher.cancel()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def watch_if_needed(environment: Any, runner: Any, began: Callable[[], bool]) -> ShapeSigterm | None:
    """The watcher on a headless run with a load shape (None otherwise: Locust's handler is in time)."""
    if environment.shape_class is not None and run_settings(environment).headless:
        return ShapeSigterm(runner, began)
    return None
