"""When a stage's window opens (swarm/stats/settling.py)."""

from __future__ import annotations

import pytest

from swarm.stats.settling import SETTLE_MAX_S, SETTLE_MIN_N, Settling


def feed(settling: Settling, start: float, seconds: float, per_s: int, ttft_at) -> None:
    """Answered warm-up requests as the master sees them: `per_s` a second, TTFT `ttft_at(t)`."""
    n, total = 0, 0.0
    for k in range(int(seconds)):
        t = start + k + 1
        n += per_s
        total += per_s * ttft_at(t - start)
        settling.add(t, n, total)


def test_settling_waits_until_the_queue_stops_growing():
    """Stepping up: the TTFT of answered requests climbs for 8 s, then holds. The window may not
    open while it climbs (the probe measured 633 ms at 215 users there), only once two
    consecutive sub-windows agree, and never before one turnover of the users."""
    climbing = Settling(start_s=100.0, need=200)

    def ttft(t: float) -> float:
        return 0.2 + 0.05 * min(t, 8.0)

    feed(climbing, 100.0, 8, 60, ttft)
    assert not climbing.settled(108.0) and climbing.trend() == "rising"
    feed(climbing, 100.0, 20, 60, ttft)  # the same history, longer: flat since 8 s
    assert climbing.settled(120.0) and climbing.trend() == "flat"
    few = Settling(start_s=100.0, need=5000)  # flat, but the users have not turned over yet
    feed(few, 100.0, 20, 60, lambda t: 0.3)
    assert not few.settled(120.0)
    assert not few.timed_out(100.0 + SETTLE_MAX_S - 1) and few.timed_out(100.0 + SETTLE_MAX_S)


def test_settling_sees_a_draining_backlog():
    """Stepping down: the previous stage's queue drains (TTFT 600 -> 200 ms), then holds."""
    s = Settling(start_s=0.0, need=100)
    feed(s, 0.0, 6, 60, lambda t: max(0.2, 0.6 - 0.1 * t))
    assert s.trend() == "falling" and not s.settled(6.0)
    s = Settling(start_s=0.0, need=100)
    feed(s, 0.0, 14, 60, lambda t: max(0.2, 0.6 - 0.1 * t))
    assert s.settled(14.0)


def test_settling_waits_until_the_open_loops_backlog_stops_draining():
    """Open loop, stepping down from an overload: the TTFT falls slowly (less than SETTLE_TOL a
    sub-window) while the server still finishes more than is offered (the backlog drains)."""
    s = Settling(start_s=0.0, need=30)
    feed(s, 0.0, 12, 50, lambda t: 3.0 - 0.02 * t)
    assert s.trend() == "flat" and s.settled(12.0)  # its TTFT looks steady
    s.note_flow(60.8, 53.5)  # the queue left by 80 and 62.5 req/s still drains
    assert not s.settled(12.0) and not s.flowing()
    s.note_flow(None, 53.5)  # no rate read yet
    assert not s.flowing()
    s.note_flow(54.9, 53.5)
    assert s.settled(12.0) and not s.overloaded()
    s.note_flow(60.3, 80.0)  # above the ceiling: the backlog grows (a fail stays a fail, unsettled)
    assert not s.settled(12.0) and s.overloaded()
    assert Settling(start_s=0.0, need=30).flowing()  # nothing noted: a closed loop


def test_settling_sub_windows_stretch_on_a_slow_stage():
    """Two answers a second: a sub-window holds SETTLE_MIN_N answers, not SETTLE_WINDOW_S."""
    s = Settling(start_s=0.0, need=4)
    feed(s, 0.0, SETTLE_MIN_N - 1, 2, lambda t: 0.1)
    assert s.means() is None  # 2 x SETTLE_MIN_N answers not there yet (10 s would hold 2 sub-windows)
    s = Settling(start_s=0.0, need=4)
    feed(s, 0.0, SETTLE_MIN_N, 2, lambda t: 0.1)
    assert s.means() == pytest.approx((0.1, 0.1)) and s.settled(float(SETTLE_MIN_N))
