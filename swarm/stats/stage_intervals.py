"""A stage's confidence intervals: of a quantile, and of the share of answers above a threshold.

- `quantile_ci`: a distribution-free confidence interval of a quantile read from a sketch: the
  order statistics whose ranks bracket q*n by z binomial standard deviations (the textbook
  interval for a quantile, e.g. Conover, *Practical Nonparametric Statistics*, 3.2), read at
  those ranks from the merged DDSketch (0.5% relative on top).
- `TailShare`: the share of answers above an objective's threshold, with a batch-means interval
  over consecutive sub-windows (answers close in time are not independent draws).

Pure; swarm/stats/stage_verdict.py reads a stage's objectives with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from swarm.stats.confidence import Z, t975
from swarm.stats.quantiles import Sketch
from swarm.stats.settling import SETTLE_WINDOW_S

# Latencies of one stage are not independent draws: a closed loop moves in waves and a queue
# carries from one request to the next. A stage's verdict uses an interval as wide as for a
# quarter of its requests (a design effect of 4: z doubled), so a stage near the threshold runs
# longer instead of ending on a lucky few seconds.
Z_STAGE = 2 * Z
MIN_BATCHES = 3  # sub-windows a tail share needs before it is judged
DESIGN_EFFECT = 4.0  # answers per independent draw, at least (as Z_STAGE assumes)


def quantile_ci(sketch: Sketch, q: float, z: float = Z) -> tuple[float, float] | None:
    """(low, high): a ~95% interval of the q-quantile of the population the sketch sampled, from
    the order statistics at ranks q*n -/+ z*sqrt(n q (1-q)). None when empty."""
    n = sketch.count
    if n == 0:
        return None
    half = z * math.sqrt(q * (1 - q) / n)
    lo = sketch.quantile(max(0.0, q - half))
    hi = sketch.quantile(min(1.0, q + half)) if q + half < 1 else sketch.max
    if lo is None or hi is None:
        return None
    return float(lo), float(hi)


@dataclass
class TailShare:
    """The share of a stage's answers above an objective's threshold, with a 95% interval.

    "p99 <= T" holds exactly when at most 1% of the answers exceed T. Answers close in time share
    a queue (a closed loop moves in waves: a whole batch of the engine waits together), so the
    share's uncertainty is read from how it varies between consecutive SETTLE_WINDOW_S
    sub-windows (batch means, the ratio estimator's variance, Student's t on their number),
    and never taken below the binomial error of a quarter of the answers counted (the design
    effect of 4 that `Z_STAGE` assumes: a few sub-windows without one answer above T say little
    when answers above it come a wave at a time). The
    order-statistics interval of `quantile_ci` assumes independent answers: within a few seconds
    it read a stage that exceeds T 1% of the time as surely passing (every answer of one wave
    below T)."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, answered, above), cumulative

    def add(self, t: float, answered: int, above: int) -> None:
        if not self.samples or answered != self.samples[-1][1]:
            self.samples.append((t, answered, above))

    def batches(self) -> list[tuple[int, int]]:
        """(answered, above) per sub-window of at least SETTLE_WINDOW_S, from the first sample."""
        out = []
        t0, n0, a0 = self.samples[0] if self.samples else (0.0, 0, 0)
        for t, n, a in self.samples[1:]:
            if t - t0 >= SETTLE_WINDOW_S and n > n0:
                out.append((n - n0, a - a0))
                t0, n0, a0 = t, n, a
        return out

    def interval(self) -> tuple[float, float] | None:
        """(share above, half-width of its 95% interval); None before MIN_BATCHES sub-windows."""
        bs = self.batches()
        k = len(bs)
        if k < MIN_BATCHES:
            return None
        n = sum(b[0] for b in bs)
        share = sum(b[1] for b in bs) / n
        var_batch = k / (k - 1) * sum((a - share * m) ** 2 for m, a in bs) / n**2
        var_binom = DESIGN_EFFECT * max(share, 1 / n) * (1 - share) / n
        t = t975(k - 1)  # a few batches' spread estimates the error loosely: Student's t, not the normal
        return share, t * math.sqrt(max(var_batch, var_binom))
