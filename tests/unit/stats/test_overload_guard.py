"""The over-saturation guard (swarm/stats/overload_guard.py)."""

from __future__ import annotations

from swarm.stats.overload_guard import OverloadGuard


def test_overload_guard():
    rising = OverloadGuard(guard_s=20)
    flat_backlog = OverloadGuard(guard_s=20)
    only_backlog = OverloadGuard(guard_s=20)
    for t in range(0, 25):
        rising.add(float(t), 5.0 * t, 0.1 + 0.05 * t)
        flat_backlog.add(float(t), 8.0 + (t % 3), 0.1 + 0.05 * t)
        only_backlog.add(float(t), 5.0 * t, 0.3 + 0.01 * (t % 2))
    assert rising.tripped() and "over-saturated" in rising.why()
    assert not flat_backlog.tripped()
    assert not only_backlog.tripped()
    short = OverloadGuard(guard_s=20)
    for t in range(0, 10):
        short.add(float(t), 5.0 * t, 0.1 + 0.05 * t)
    assert not short.tripped()  # not yet for the guard's whole time
    assert not OverloadGuard(guard_s=0).tripped()


def test_a_backlog_levelling_off_is_no_overload():
    """An open loop filling up to its level: in flight rises fast, then ever slower (the streams
    5,000 slow ones reach), TTFT creeping up with the batch. Not without bound; a constant excess
    rate is, however slowly it grows."""
    import math

    filling, excess = OverloadGuard(guard_s=20), OverloadGuard(guard_s=20)
    for t in range(18, 40):
        filling.add(float(t), 5700.0 * (1 - math.exp(-t / 6.0)), 0.5 + 0.001 * t)
        excess.add(float(t), 5000.0 + 1.6 * t, 0.5 + 0.001 * t)
    assert not filling.tripped()
    assert excess.tripped()
