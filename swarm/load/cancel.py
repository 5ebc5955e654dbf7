"""`--cancel RATE[@WHEN]`: clients that hang up. Which requests are cut, and when.

RATE is the share of requests whose client closes the stream (`20%`, or a fraction `0.2`); WHEN
is where it hangs up: a duration after sending (`2s`, `500ms`), `first-token` (as soon as the
first generated token arrives, the default) or `tokens:N` (once N tokens have arrived). A request
that ends before its point (an answer shorter than N tokens, one that finishes in under the
duration) is not cut: it ends as it ends, and its record says so.

Which requests are cut is drawn from the run's seed (`--seed`, or the one the master draws and
hands every worker): each user draws from its own stream `Random("SEED:cancel:WORKER:USER")`, one
draw per request it sends, so a rerun with the same seed, workers and users cuts the same
requests: user U of worker W cuts its k-th request in both. Pure: no I/O, no clock.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from swarm.core.errors import UsageError
from swarm.core.units import parse_duration, parse_share

FIRST_TOKEN = "first-token"
_TOKENS = re.compile(r"tokens:(\d+)")
_EXAMPLES = "e.g. 20%@first-token, 5%@2s, 10%@tokens:16"


@dataclass(frozen=True, slots=True)
class CancelSpec:
    """`--cancel` parsed: the share cut and the point of the cut (exactly one of the two set)."""

    share: float  # 0 < share <= 1
    after_s: float | None = None  # hang up this long after sending
    after_tokens: int | None = None  # hang up once this many tokens have arrived (first-token: 1)

    @property
    def when(self) -> str:
        """WHEN as the run's output says it."""
        if self.after_s is not None:
            return f"{self.after_s:g}s after sending"
        if self.after_tokens == 1:
            return "at the first token"
        return f"after {self.after_tokens} tokens"

    def describe(self) -> str:
        return f"{self.share * 100:g}% of requests cancelled by the client {self.when}"


def parse_cancel(text: str | None) -> CancelSpec | None:
    """`--cancel RATE[@WHEN]` -> CancelSpec; None/"" -> None. Raises UsageError (one line) on bad input."""
    if text is None or not str(text).strip():
        return None
    raw = str(text).strip()
    rate, _, when = raw.partition("@")
    share = parse_share(rate, "--cancel RATE")
    when = when.strip() or FIRST_TOKEN
    if when == FIRST_TOKEN:
        return CancelSpec(share, after_tokens=1)
    m = _TOKENS.fullmatch(when)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise UsageError(f"--cancel {raw!r}: tokens:N needs N of at least 1")
        return CancelSpec(share, after_tokens=n)
    try:
        seconds = parse_duration(when)
    except UsageError:
        raise UsageError(
            f"--cancel {raw!r}: WHEN must be a duration after sending, first-token or tokens:N ({_EXAMPLES})"
        ) from None
    if seconds <= 0:
        raise UsageError(f"--cancel {raw!r}: the duration must be above 0")
    return CancelSpec(share, after_s=seconds)


class CancelDraw:
    """One user's draws: `next()` says whether its next request is cut (one draw per request)."""

    __slots__ = ("_random", "share")

    def __init__(self, share: float, seed: int | None, worker: int, user: int) -> None:
        self.share = share
        key = f"{seed}:cancel:{worker}:{user}" if seed is not None else None
        self._random = random.Random(key).random  # (None: the system's entropy, an unseeded run)

    def next(self) -> bool:
        return self._random() < self.share


__all__ = ["FIRST_TOKEN", "CancelDraw", "CancelSpec", "parse_cancel"]
