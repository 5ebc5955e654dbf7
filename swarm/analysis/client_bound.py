"""`client_bound` findings: stages where a worker's CPU was over the bar (`swarm.stats.cpu.cpu_limit()`,
the bar the master judges live), so the swarm measured itself there and those latencies are not trusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from swarm.analysis.finding import Finding, StageRow
from swarm.core.units import stage_name
from swarm.stats.cpu import ClientLoad
from swarm.stats.summary import ClientBound


def _where(rows: Sequence[StageRow], stage: int) -> str:
    by_stage = {r.stage: r for r in rows}
    return by_stage[stage].label if stage in by_stage else stage_name(stage)


def client_bound(rows: Sequence[StageRow], load: ClientLoad) -> list[Finding]:
    """Stages where a worker's demand (CPU + time waiting for a CPU) averaged over the bar:
    `load.bound()`, the judgement the master makes live (`cpu_limit()`: 90% of a core unless
    $SWARM_CLIENT_CPU_MAX says otherwise), from each worker's own CPU, run-queue wait and wall
    seconds in the stage (client_cpu.jsonl)."""
    out = []
    for stage, (worker, pct) in sorted(load.bound().items()):
        cpu, wait = load.split(stage, worker)
        what = (
            f"{cpu:.0f}% CPU"
            if wait < 1.0
            else f"{pct:.0f}% of a core: {cpu:.0f}% on a CPU, {wait:.0f}% waiting for one"
        )
        out.append(_bound(stage, f"At {_where(rows, stage)} {worker} needed {what}"))
    return out


def _bound(stage: int, what: str) -> Finding:
    return Finding(
        "client_bound",
        stage,
        f"{what}: the swarm itself is the bottleneck there — add --workers; "
        f"this stage's latencies are not trusted.",
        trusted=False,
    )


def client_bound_reported(
    rows: Sequence[StageRow], entries: Iterable[ClientBound | Mapping[str, Any]]
) -> list[Finding]:
    """The same finding from summary.json's `client_bound` (the master's live judgement of the
    same CPU reports: {"stage", "worker", "cpu_percent"}), for runs without client_cpu.jsonl (plain
    `locust` without --swarm-out)."""
    return [
        _bound(
            int(e["stage"]),
            f"At {_where(rows, int(e['stage']))} {e['worker']} needed {float(e['cpu_percent']):.0f}% of a core "
            f"(its own reports)",
        )
        for e in entries
    ]
