"""The SLO answer of a sweep: the highest concurrency whose stage meets every objective
(`slo_max_concurrency`), and where it does not, what the next load broke.
"""

from __future__ import annotations

from collections.abc import Sequence

from swarm.analysis.finding import Finding, StageRow, prose_number, prose_seconds


def slo_max_concurrency(rows: Sequence[StageRow], slo_text: str) -> Finding | None:
    """The highest concurrency whose stage meets every objective of `slo_text` (swarm.stats.slo syntax)."""
    from swarm.stats import slo

    objectives = slo.parse(slo_text)
    passing, failing = [], []
    for r in rows:
        verdicts = slo.evaluate(objectives, r.entry)
        (passing if all(v.ok for v in verdicts) else failing).append((r, [v for v in verdicts if not v.ok]))
    if not passing:
        r, bad = rows[0], failing[0][1] if failing else []
        why = "; ".join(v.describe() for v in bad[:2])
        return Finding("slo_max_concurrency", None, f"No stage meets {slo_text}: already at {r.label} {why}.")
    best = max(passing, key=lambda p: (p[0].users or 0, p[0].stage))[0]
    above = [(r, bad) for r, bad in failing if (r.users or 0) > (best.users or 0)]
    tail = ""
    if above:
        r, bad = above[0]
        tail = f"; at {r.label} " + "; ".join(v.describe() for v in bad[:2])
    return Finding(
        "slo_max_concurrency",
        best.stage,
        f"Highest concurrency meeting {slo_text}: {best.label} ({prose_number(best.qps)} QPS, TTFT p99 "
        f"{prose_seconds(best.ttft_p99)}){tail}.",
    )
