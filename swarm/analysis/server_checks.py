"""Server metrics are untrusted input: the sanity checks each figure of a scrape passes before the
analysis reads it (pure functions).

A target's /metrics is another program's text, and a proxy, a broken exporter or a hostile server
can write anything in it. A figure that fails a check is not read (the snapshot holds None, as for
a figure the family lacks) and the check it failed is kept beside it
(`ServerSnapshot.rejected`), so the diagnosis says which check failed instead of naming a cause from
it (swarm/analysis/server_trust.py). The checks, each figure being a count, a size, a duration or a
fraction of one engine's work:

- finite: NaN, +Inf and -Inf count nothing;
- not negative: no counter, queue or latency sum goes below 0;
- at most 2^53 (`EXACT_MAX`): past it a float no longer counts by ones, and no server has served
  that many tokens; it also keeps every sum and difference of figures finite;
- a fraction (`FRACTIONS`: KV usage) at most 1;
- a histogram: one count per bound, bounds ascending and finite but the last (+Inf), and its
  counts, sum and count passing the checks above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

EXACT_MAX = 2.0**53  # the largest count a float holds by ones
FRACTIONS = frozenset({"kv_usage"})  # figures that are a share of something: at most 1


def value_fault(fieldname: str, v: float) -> str | None:
    """The check `v` fails as the figure `fieldname` ("NaN", "negative (-289)"); None: it passes."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v < 0:
        return f"negative ({v:g})"
    if v > EXACT_MAX:
        return f"{v:.3g}, beyond 2^53"
    if fieldname in FRACTIONS and v > 1.0:
        return f"{v:g}, above 1 for a fraction"
    return None


def histogram_fault(
    bounds: Sequence[float], counts: Sequence[float], total: float, count: float
) -> str | None:
    """The check a histogram (upper bounds, cumulative counts, sum, count) fails; None: it passes."""
    if not bounds or len(bounds) != len(counts):
        return f"{len(bounds)} bucket bounds for {len(counts)} counts"
    finite = bounds[:-1] if math.isinf(bounds[-1]) and bounds[-1] > 0 else bounds
    if any(math.isnan(b) or math.isinf(b) or abs(b) > EXACT_MAX for b in finite):
        return "a bucket bound that is no number"
    if any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
        return "bucket bounds out of order"
    for what, v in (*(("a bucket", c) for c in counts), ("its _sum", total), ("its _count", count)):
        fault = value_fault("", v)
        if fault:
            return f"{what} {fault}"
    return None


def safe_total(values: Iterable[float]) -> float:
    """The exact sum of figures that pass the checks (math.fsum); with one that does not, the plain
    sum, NaN or infinite as it comes, for the checks to reject (fsum raises on an overflow)."""
    values = list(values)
    if all(math.isfinite(v) and abs(v) <= EXACT_MAX for v in values):
        return math.fsum(values)
    return sum(values)
