"""Suite-wide: tests under tests/integration and tests/e2e start real processes, so they carry the
`integration` marker wherever they are collected from (`-m "not integration"` keeps its meaning)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Locust patches gevent into the process; in an xdist worker the test queue then waits on a
    # gevent lock that the worker's receiving thread (a real thread) releases. gevent wakes a hub
    # from another thread, but a hub with nothing else to watch ends the wait at once instead
    # ("LoopExit: This operation would block forever"). One idle watcher keeps the hub waiting.
    import gevent

    _HUB_KEEPALIVE = gevent.get_hub().loop.async_()
    _HUB_KEEPALIVE.start(lambda: None)

import pytest

TESTS = Path(__file__).resolve().parent
PROCESS_DIRS = ("integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if path.is_relative_to(TESTS) and path.relative_to(TESTS).parts[0] in PROCESS_DIRS:
            item.add_marker(pytest.mark.integration)


def pytest_configure(config: pytest.Config) -> None:
    """A terminated test run (SIGTERM: `timeout`, CI's cancel) stops as Ctrl-C does, so every
    fixture's teardown stops the processes it started instead of leaving them running."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    # A shell that starts the suite as a background job (`make test &`, `nohup ... &`) leaves
    # SIGINT ignored, and an ignored signal stays ignored in every child: the processes the tests
    # Ctrl-C (swarm run, Locust) would never see it (both Ctrl-C tests hung so once). Back to
    # Python's own handler, which children reset to the default on exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
