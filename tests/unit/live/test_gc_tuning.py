"""The collector's policy on the processes that send requests (swarm/live/gc_tuning.py): full
collections rare, the young generation collected and frozen every YOUNG_EVERY_S, the frozen
objects' cyclic garbage freed by a clean-up once the heap grew past what the requests in flight explain; the send-lag
figures before and after are in docs/performance.md (benchmarks/streams_10k.py)."""

from __future__ import annotations

import gc
import sys
import weakref

import gevent
import pytest

from swarm.live import gc_tuning
from swarm.live.gc_tuning import (
    BLOCKS_PER_STREAM,
    FULL_EVERY,
    REFREEZE_MIN,
    YoungCollector,
    relax_full_collections,
)


@pytest.fixture(autouse=True)
def restore_gc():
    before = gc.get_threshold()
    yield
    gc_tuning.COLLECTOR.stop()
    gc.unfreeze()
    gc.set_threshold(*before)


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_only_the_full_collections_threshold_moves():
    gc.set_threshold(700, 10, 10)
    relax_full_collections()
    assert gc.get_threshold() == (700, 10, FULL_EVERY)


def test_a_higher_threshold_already_set_is_kept():
    gc.set_threshold(5000, 20, 5000)
    relax_full_collections()
    assert gc.get_threshold() == (5000, 20, 5000)


@pytest.mark.parametrize("role, collector", [("--worker", True), ("--master", False), ("--headless", True)])
def test_the_swarms_init_starts_it_where_requests_are_sent(role, collector):
    """LLMUser's init listener (swarm/live/user.py) on a real Locust environment: workers and local
    runs send the requests (the collector, and full collections rare); the master's full
    collections are rare too (its heap grows with its workers), without the collector."""
    from locust.argument_parser import parse_options
    from locust.env import Environment
    from locust.event import Events

    from swarm.live import user

    gc.set_threshold(700, 10, 10)
    user._on_init(Environment(events=Events(), parsed_options=parse_options(args=[role])))
    assert gc.get_threshold() == (700, 10, FULL_EVERY)
    assert (gc_tuning.COLLECTOR._greenlet is not None) is collector


def test_survivors_of_a_young_collection_are_frozen_and_still_die_by_reference_counting():
    c = YoungCollector()
    c.young()
    frozen = gc.get_freeze_count()
    kept = [[i] for i in range(1000)]  # 1,001 tracked objects, alive
    c.young()
    assert gc.get_freeze_count() >= frozen + 1000 and gc.get_count()[0] < 50
    del kept  # frozen objects are freed by their reference count as any other
    assert gc.get_freeze_count() < frozen + 1000


def test_a_clean_up_frees_the_cycles_frozen_since_the_last_one():
    c = YoungCollector()
    cycle = Cycle()
    gone = weakref.ref(cycle)
    c.young()  # frozen while alive
    del cycle
    c.young()
    assert gone() is not None  # unreachable, but frozen: no collection scans it
    assert c.clean_up() >= 1 and gone() is None
    assert 0 < c.baseline <= sys.getallocatedblocks() + 100 and c.cleanups == 1


def test_a_clean_up_is_due_once_the_blocks_grew_by_half_and_by_the_minimum():
    c = YoungCollector()
    c.baseline = 1_000_000
    assert not c.needs_clean_up(1_400_000) and c.needs_clean_up(1_500_001)
    c.baseline = 20_000  # a small heap: half of it is not enough
    assert not c.needs_clean_up(20_000 + REFREEZE_MIN) and c.needs_clean_up(20_001 + REFREEZE_MIN)


def test_growth_the_requests_in_flight_explain_is_no_cue():
    """An open loop filling to thousands of streams grows the heap by what each stream holds: no
    clean-up (a full collection, 0.5 s at 5,000 streams) for that; growth beyond it still is one."""
    c = YoungCollector()
    c.baseline, c.baseline_streams = 1_000_000, 100
    filled = 1_000_000 + 4_900 * BLOCKS_PER_STREAM  # 5,000 streams now, each holding its share
    assert not c.needs_clean_up(filled, streams=5_000)
    assert c.needs_clean_up(filled, streams=100)  # the same heap with the streams gone: garbage
    explained = 1_000_000 + 4_900 * BLOCKS_PER_STREAM
    assert not c.needs_clean_up(int(explained * 1.5), streams=5_000)
    assert c.needs_clean_up(int(explained * 1.5) + 1, streams=5_000)
    c.baseline_streams = 6_000  # fewer streams than at the last clean-up explain no less than it
    assert not c.needs_clean_up(1_400_000, streams=10) and c.needs_clean_up(1_500_001, streams=10)


def test_the_clean_up_takes_the_streams_in_flight_as_its_baseline():
    c = YoungCollector(streams=lambda: 42)
    c.clean_up()
    assert c.baseline_streams == 42


def test_the_greenlet_keeps_the_young_generation_small_and_a_clean_up_frees_what_it_froze():
    before = gc_tuning.COLLECTOR.cleanups
    gc_tuning.COLLECTOR.start()
    assert (
        gc_tuning.COLLECTOR.cleanups == before + 1
    )  # the start is a clean-up: nothing frozen before it leaks
    cycle = Cycle()
    gone = weakref.ref(cycle)
    gevent.sleep(gc_tuning.YOUNG_EVERY_S * 3)  # the greenlet froze it
    del cycle
    gc.collect()
    assert gone() is not None
    gc_tuning.COLLECTOR.clean_up()
    assert gone() is None and gc_tuning.COLLECTOR.cleanups == before + 2
    gc_tuning.COLLECTOR.stop()
    assert gc_tuning.COLLECTOR._greenlet is None and gc.get_freeze_count() == 0


def test_the_greenlet_cleans_up_once_the_heap_grew_by_half(monkeypatch):
    """The bound: cyclic garbage frozen while the heap grows is freed once the blocks grew by half
    (and by the minimum), with no test stop."""
    monkeypatch.setattr(gc_tuning, "REFREEZE_MIN", 1000)
    c = YoungCollector(every_s=0.005, check_s=0.01)
    c.start()
    try:
        cycle = Cycle()
        gone = weakref.ref(cycle)
        gevent.sleep(0.03)  # frozen while alive
        del cycle
        grown = [[i] for i in range(c.baseline * 3 // 4)]  # two blocks each: the heap grows by more than half
        gevent.sleep(0.1)
        assert gone() is None and c.cleanups >= 2
        del grown
    finally:
        c.stop()
