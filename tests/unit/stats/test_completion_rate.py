"""Completions per second from the workers' reports (swarm/stats/completion_rate.py)."""

from __future__ import annotations

import pytest

from swarm.stats.completion_rate import Completions


def test_completions_per_worker_reports():
    c = Completions()
    # two workers, 30 and 20 completions/s, reporting every 3 s at different phases
    for k in range(10):
        c.add("a", 3.0 * k, 90)
        c.add("b", 1.5 + 3.0 * k, 60)
    assert c.rate(5.0) == pytest.approx(50.0)
    assert c.rate_halfwidth(5.0) == pytest.approx(0.0)
    assert c.rate(100.0) is None
    one = Completions()
    one.add("a", 0.0, 90)
    one.add("a", 3.0, 90)
    one.add("b", 1.5, 60)
    assert one.rate(0.0) is None  # b has reported once since: not yet (half the rate otherwise)
    one.add("a", 6.0, 90)
    one.add("a", 15.0, 270)  # b silent for 13.5 s while a reports: gone, a alone counts
    assert one.rate(0.0) == pytest.approx(30.0)
