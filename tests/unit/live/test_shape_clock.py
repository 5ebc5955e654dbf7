"""The shape's stage ends land on time though Locust ticks it once a second (swarm/live/shape.py
`SwarmShape._at`): a `-t 2s` run stopped after 3 s, each stage ended up to a second late."""

from __future__ import annotations

import time

from swarm.live.shape import TICK_S, SwarmShape


def test_a_boundary_before_the_next_tick_is_waited_for():
    shape = SwarmShape()
    shape.start_time = time.perf_counter() - 1.7  # the tick at 1.7 s of a 2 s stage
    t0 = time.perf_counter()
    t = shape._at(2.0)
    waited = time.perf_counter() - t0
    assert t >= 2.0 and 0.25 <= waited < TICK_S  # ~0.3 s: the stage ends at 2.0 s, not at the 2.7 s tick


def test_a_boundary_past_the_next_tick_or_already_behind_is_not():
    shape = SwarmShape()
    shape.start_time = time.perf_counter() - 1.7
    t0 = time.perf_counter()
    assert 1.7 <= shape._at(5.0) < 2.0  # the next tick comes first
    assert 1.7 <= shape._at(1.0) < 2.0  # already reached: the caller acts on it now
    assert time.perf_counter() - t0 < 0.1
