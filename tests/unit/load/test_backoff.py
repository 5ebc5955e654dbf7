"""The closed loop's pause after failures (swarm/load/backoff.py): grows, is capped, is jittered."""

from __future__ import annotations

import random

from swarm.load.backoff import BACKOFF_BASE_S, BACKOFF_CAP_S, backoff_s


def test_no_failure_no_pause_then_doubling_up_to_the_cap_with_jitter():
    rng = random.Random(1)
    assert backoff_s(0, rng) == 0.0
    for n, longest in ((1, BACKOFF_BASE_S), (2, 2 * BACKOFF_BASE_S), (3, BACKOFF_CAP_S), (50, BACKOFF_CAP_S)):
        pauses = [backoff_s(n, rng) for _ in range(200)]
        assert all(longest / 2 <= p <= longest for p in pauses), (n, min(pauses), max(pauses))
        assert max(pauses) - min(pauses) > longest / 4  # jittered: users do not retry in step
    assert backoff_s(10**6, rng) <= BACKOFF_CAP_S  # no overflow however long the failures last
