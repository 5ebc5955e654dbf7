"""The closed loop's pause after a failed request: exponential backoff with jitter.

A closed-loop user sends its next request as soon as the last one ends. Against a target that
fails every request at once (a wrong key's 401, a bad chunk, a refused connection) that is a busy
loop: 4 users sent ~44,000 requests in 8 s to an always-401 server (5,500/s). After the n-th failure
in a row, a user pauses a random time between half and all of min(BACKOFF_CAP_S,
BACKOFF_BASE_S * 2**(n - 1)): 0.125-0.25 s, 0.25-0.5 s, then 0.5-1 s; a success resets n, a
cancelled request leaves it. A user then sends at most ~1.3 requests/s to a failing target, about
what one streamed answer of a few dozen tokens allows a healthy server; the jitter keeps users
from retrying in step. The pause is not load: it lies outside every request's timing.

Open loop (--rate) and trace replay never pause (swarm/live/user.py): their schedule is the load,
a failing target gets the rate asked for and no more, and a pause would only make later slots
leave late, in a burst.
"""

from __future__ import annotations

import random

BACKOFF_BASE_S = 0.25  # the longest pause after a first failure
BACKOFF_CAP_S = 1.0  # the longest pause, however many failures in a row


def backoff_s(failures: int, rng: random.Random) -> float:
    """The pause after the `failures`-th failure in a row (0 for none)."""
    if failures <= 0:
        return 0.0
    d = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(failures - 1, 30))
    return rng.uniform(d / 2, d)
