"""Which endpoint a request goes to when the run has several (`--host URL1,URL2,...`, `--balance`).

One `Balancer` per process and endpoint list, shared by the process's users (swarm/live/state.py):

- `round-robin` (default): the endpoints in turn, one shared counter per process;
- `least-inflight`: the endpoint with the fewest of this process's requests in flight; ties go
  round-robin (the scan starts where the counter stands).

A dead endpoint answers fast (connection refused), so least-inflight would pour traffic into it,
and round-robin would send it its full share to fail. So an endpoint whose last `DEAD_AFTER`
requests all failed to connect (`connect_error`: refused, reset or unreachable before a status) is
*taken out*: the picks pass it over for a back-off (`BACKOFF_S`, doubling each time it is taken
out again in a row, at most `BACKOFF_MAX_S`), then it is tried again; one answer of any kind (an
HTTP error too: it is reachable) puts it back for good and resets its back-off. Every request is
still sent somewhere and recorded once, with its endpoint and its outcome: the ones that failed
on the dead endpoint as `connect_error` with the reason, the ones that passed it over as requests
of the endpoint that took them. Each taking out and each return is logged, and `skipped` counts the
picks made while each endpoint was out. When every endpoint is out, the one whose back-off ends
first takes the request (it fails, or finds it back). A run with one endpoint never takes it out:
its requests go to it and fail as they always did.

`pick` and `done` are O(endpoints) (a handful) per request, nothing per token; no lock is needed
(gevent switches only on I/O, and neither does any).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from swarm.core.options import BALANCE_NAMES
from swarm.core.records import Outcome

log = logging.getLogger(__name__)

DEAD_AFTER = 3  # connection failures in a row, and no answer between them, that take an endpoint out
BACKOFF_S = 1.0  # the first back-off of an endpoint taken out; doubled each time in a row
BACKOFF_MAX_S = 16.0


class Balancer:
    """The endpoints' in-flight counts, connection failures in a row and back-offs in one process."""

    def __init__(
        self,
        labels: tuple[str, ...],
        policy: str = "round-robin",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if policy not in BALANCE_NAMES:
            raise ValueError(f"unknown balance policy {policy!r}")
        n = len(labels)
        self.labels = labels
        self.least = policy == "least-inflight"
        self.clock = clock
        self.in_flight = [0] * n  # this process's requests sent to each and not yet done
        self.skipped = [0] * n  # picks made while each was out (requests that went elsewhere instead)
        self._failed = [0] * n  # connection failures in a row since its last answer
        self._out_until = [0.0] * n  # taken out until this clock time (0: in)
        self._strikes = [0] * n  # times taken out in a row (the back-off doubles)
        self._next = 0  # where the round-robin scan starts

    def pick(self) -> int:
        """The index of the endpoint the next request goes to (counted in flight until `done`)."""
        n = len(self.labels)
        if n == 1:
            self.in_flight[0] += 1
            return 0
        now = self.clock()
        start, best = self._next, -1
        for j in range(n):
            i = (start + j) % n
            if self._out_until[i] > now:
                self.skipped[i] += 1
            elif best < 0 or (self.least and self.in_flight[i] < self.in_flight[best]):
                best = i
        if best < 0:  # every endpoint is out: the one back first
            best = min(range(n), key=self._out_until.__getitem__)
        self._next = (best + 1) % n
        self.in_flight[best] += 1
        return best

    def done(self, i: int, outcome: Outcome) -> None:
        """Request to endpoint `i` ended with `outcome`."""
        self.in_flight[i] -= 1
        if len(self.labels) == 1 or outcome is Outcome.CANCELLED:
            return
        if outcome is not Outcome.CONNECT_ERROR:  # it answered (or at least took the connection)
            if self._strikes[i] and self._out_until[i] <= self.clock():
                log.warning("swarm: endpoint %s answers again: back in the balance", self.labels[i])
                self._strikes[i] = 0
            self._failed[i] = 0
            return
        self._failed[i] += 1
        now = self.clock()
        if self._failed[i] >= DEAD_AFTER and self._out_until[i] <= now:
            self._failed[i] = 0
            backoff = min(BACKOFF_S * 2 ** self._strikes[i], BACKOFF_MAX_S)
            self._strikes[i] += 1
            self._out_until[i] = now + backoff
            log.warning(
                "swarm: endpoint %s: %d connection failures in a row: its share goes to the other "
                "endpoints for %.0f s, then it is tried again",
                self.labels[i],
                DEAD_AFTER,
                backoff,
            )

    def out(self, i: int) -> bool:
        """Whether endpoint `i` is taken out now."""
        return self._out_until[i] > self.clock()
