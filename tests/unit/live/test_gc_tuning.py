"""Full collections made rare on the processes that send requests (swarm/live/gc_tuning.py); the
send-lag figures before and after are in its docstring and docs/performance.md (benchmarks/streams_10k.py)."""

from __future__ import annotations

import gc

import pytest

from swarm.live.gc_tuning import FULL_EVERY, relax_full_collections


@pytest.fixture(autouse=True)
def restore_thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_only_the_full_collections_threshold_moves():
    gc.set_threshold(700, 10, 10)
    relax_full_collections()
    assert gc.get_threshold() == (700, 10, FULL_EVERY)


def test_a_higher_threshold_already_set_is_kept():
    gc.set_threshold(5000, 20, 5000)
    relax_full_collections()
    assert gc.get_threshold() == (5000, 20, 5000)


@pytest.mark.parametrize("role, relaxed", [("--worker", True), ("--master", False), ("--headless", True)])
def test_the_swarms_init_relaxes_them_where_requests_are_sent(role, relaxed):
    """LLMUser's init listener (swarm/live/user.py) on a real Locust environment: workers and local
    runs send the requests, the master does not."""
    from locust.argument_parser import parse_options
    from locust.env import Environment
    from locust.event import Events

    from swarm.live import user

    gc.set_threshold(700, 10, 10)
    user._on_init(Environment(events=Events(), parsed_options=parse_options(args=[role])))
    assert gc.get_threshold() == (700, 10, FULL_EVERY if relaxed else 10)
