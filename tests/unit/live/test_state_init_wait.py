"""A worker that joins a running test fires `test_start` before Locust has set its runner and
fired `init` (swarm/live/state.py `wait_for_init`): the swarm waits for both, and a worker that is
still not connected after INIT_WAIT_S leaves the run with the run's internal-error flag set (exit 2,
naming its log), not half-prepared. The late join in real processes: tests/integration/test_trace_replay.py."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import locust.log as locust_log
import pytest

from swarm.live import state, user
from swarm.live.state import StatsHandles, swarm_state, wait_for_init


class Runner:
    def __init__(self) -> None:
        self.quits = 0

    def quit(self) -> None:
        self.quits += 1


def joining_worker() -> SimpleNamespace:
    return SimpleNamespace(parsed_options=SimpleNamespace(worker=True), runner=None)


def connect(env: SimpleNamespace, runner: Runner) -> None:
    env.runner = runner
    swarm_state(env).stats = StatsHandles()  # what `init` sets up


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    monkeypatch.setattr(state, "INIT_WAIT_S", 0.2)
    monkeypatch.setattr(locust_log, "unhandled_greenlet_exception", False)


def test_a_test_start_before_init_waits_for_it():
    env = joining_worker()
    gevent.spawn_later(0.05, connect, env, Runner())
    assert wait_for_init(env) is True and env.runner is not None


def test_a_local_or_master_runner_never_waits():
    assert wait_for_init(SimpleNamespace(parsed_options=SimpleNamespace(worker=False), runner=None)) is True


def test_a_worker_never_connected_leaves_the_run_flagged():
    env = joining_worker()
    user._on_test_start(env)
    assert locust_log.unhandled_greenlet_exception is True  # its reports say internal_error: exit 2
    assert swarm_state(env).stats is None  # nothing prepared on a half-started worker
    runner = Runner()
    connect(env, runner)
    gevent.sleep(0.8)
    assert runner.quits == 1
