"""The ceiling of a sweep: the first step where QPS stops growing while TTFT p99 grows (the seed's
"64.9 vs 64.7 QPS" at 200 -> 256 users), and the `saturation` / `no_saturation` finding that says it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from swarm.analysis.finding import Finding, StageRow, prose_number, prose_seconds

QPS_GROWTH_MIN = 0.05  # a stage whose QPS grows less than this (fraction) has plateaued


def _growth(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old <= 0:
        return None
    return new / old - 1.0


def ceiling(rows: Sequence[StageRow]) -> tuple[StageRow, StageRow] | None:
    """(ceiling stage, the next one) for the first step where QPS grows < 5% while TTFT p99 grows."""
    for prev, cur in itertools.pairwise(rows):
        qg, tg = _growth(cur.qps, prev.qps), _growth(cur.ttft_p99, prev.ttft_p99)
        if qg is not None and tg is not None and qg < QPS_GROWTH_MIN and tg > 0:
            return prev, cur
    return None


def saturation(rows: Sequence[StageRow], untrusted: set[int] = frozenset()) -> Finding | None:
    if len(rows) < 2:
        return None
    found = ceiling(rows)
    if found is None:
        a, b = rows[-2], rows[-1]
        qg = _growth(b.qps, a.qps)
        grew = "n/a" if qg is None else f"{qg * 100:+.1f}%"
        return Finding(
            "no_saturation",
            b.stage,
            f"No ceiling reached: from {a.label} to {b.label} QPS still went {prose_number(a.qps)} -> "
            f"{prose_number(b.qps)} ({grew}); extend the sweep to find the ceiling.",
        )
    prev, cur = found
    qg, tg = _growth(cur.qps, prev.qps), _growth(cur.ttft_p99, prev.ttft_p99)
    doubt = prev.stage in untrusted or cur.stage in untrusted
    tail = (
        " (but the swarm itself was the limit there, CPU-bound or sending late: the plateau may be its own)"
        if doubt
        else ""
    )
    return Finding(
        "saturation",
        prev.stage,
        f"Ceiling at {prev.label}: going to {cur.label} moved QPS {prose_number(prev.qps)} -> {prose_number(cur.qps)} "
        f"({qg * 100:+.1f}%) while TTFT p99 rose {prose_seconds(prev.ttft_p99)} -> {prose_seconds(cur.ttft_p99)} "
        f"({tg * 100:+.0f}%): more users only queue{tail}.",
        trusted=not doubt,
    )
