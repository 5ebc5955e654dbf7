"""swarm/load/arrivals.py: the open-loop schedule's slots (constant and Poisson gaps)."""

from __future__ import annotations

import itertools

import pytest

from swarm.core.errors import UsageError
from swarm.load.arrivals import ArrivalSchedule


def test_constant_arrivals_are_evenly_spaced_and_the_schedule_never_waits_for_the_caller():
    s = ArrivalSchedule(4.0, "constant")
    slots = [s.next_slot() for _ in range(9)]
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert gaps == pytest.approx([0.25] * 8)
    # slots are handed out in order however late the caller asks: they are not moved to "now"
    assert slots == sorted(slots)


def test_poisson_gaps_average_one_over_the_rate_and_repeat_with_a_seed():
    a, b = ArrivalSchedule(10.0, "poisson", seed=3), ArrivalSchedule(10.0, "poisson", seed=3)
    gaps_a = [a.gap() for _ in range(20000)]
    assert gaps_a == [b.gap() for _ in range(20000)]
    mean = sum(gaps_a) / len(gaps_a)
    assert mean == pytest.approx(0.1, rel=0.03)
    # exponential gaps: about 1/e of them longer than the mean (a constant schedule has none)
    assert sum(g > 0.1 for g in gaps_a) / len(gaps_a) == pytest.approx(0.368, abs=0.02)


def test_an_unknown_arrival_kind_is_a_usage_error():
    with pytest.raises(UsageError, match="--arrivals 'burst'"):
        ArrivalSchedule(1.0, "burst")
