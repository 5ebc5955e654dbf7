"""Open-loop arrivals: requests are sent on a schedule, not when the previous one finishes.

A closed loop (N users, each sending after its last answer) slows down with the server and
hides queueing: the peers' best-known flaw (coordinated omission). In open-loop mode every
process keeps an `ArrivalSchedule` (Poisson or constant arrivals at its share of `--rate`),
and each LLMUser, when free, takes the next slot in order and sleeps until it. When all users
are busy, slots pile up and requests leave late: `RequestRecord.send_lag_s` says by how much,
so client-side queueing is measured instead of silently lowering the offered load. `-u`
caps the requests in flight.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from swarm.core.errors import UsageError

ARRIVALS = ("poisson", "constant")


@dataclass
class ArrivalSchedule:
    """Slots (time.perf_counter() values) for one process, handed out in order."""

    rate_per_s: float
    kind: str = "poisson"
    seed: int | None = None
    _next: float = field(default=0.0, init=False)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in ARRIVALS:
            raise UsageError(f"bad --arrivals {self.kind!r}: use one of {', '.join(ARRIVALS)}")
        self._rng = random.Random(self.seed)
        self._next = time.perf_counter()

    def gap(self) -> float:
        if self.kind == "constant":
            return 1.0 / self.rate_per_s
        return self._rng.expovariate(self.rate_per_s)

    def next_slot(self) -> float:
        """The next arrival time; the schedule advances whether or not the caller is on time."""
        slot = self._next
        self._next = slot + self.gap()
        return slot
