"""The sections the master adds to summary.json beside `summary.build`'s (pure: facts in, entries out).

The load shape's stage timeline (and its figures copied onto each stage entry), the prefix-cache
share each workload meant to hit, the trace replay's account, the client-bound stages, the SLO
verdicts, the search's result with each probe's stage QPS, the circuit breaker's reason and the
run's provenance.
`add_sections` adds them in summary.json's key order; each is absent when it does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.stats.slo import Verdict
from swarm.stats.summary import ClientBound, StageTimelineEntry, Summary, VerdictEntry


@dataclass
class Sections:
    """What the master knows besides the aggregate, at the moment the summary is built."""

    timeline: Sequence[StageTimelineEntry] = ()  # the load shape's stages (empty: no shape)
    prefix_shares: Mapping[str, float] = field(default_factory=dict)  # workload -> intended share
    trace_replay: dict[str, Any] | None = None  # --trace-replay: the dispatcher's summary
    replay_workload: str = ""  # the workload name the replay's implied hit rate goes under
    client_bound: Mapping[int, tuple[str, float]] = field(default_factory=dict)  # stage -> (worker, %)
    verdicts: Sequence[Verdict] = ()
    search: Mapping[str, Any] | None = None  # --search: the search's result so far
    aborted: dict[str, Any] | None = None  # --abort-on: the condition that held
    provenance: Mapping[str, Any] | None = None  # what the run was (swarm/stats/provenance.py)
    prefix_bust: bool = False  # --prefix-cache bust: every prefix unique, so the design implies no hits


def add_sections(s: Summary, sections: Sections) -> Summary:
    """`s` with every section that applies added (in place; returned for convenience)."""
    if sections.timeline:
        s["stage_timeline"] = list(sections.timeline)
        with_stage_timeline(s, sections.timeline)
    shares = dict(sections.prefix_shares)
    if sections.trace_replay is not None:  # rows sent, re-assigned, lagging workers
        s["trace_replay"] = sections.trace_replay
        implied = sections.trace_replay["implied_prefix_hit_rate"]
        if implied is not None:  # the hit rate the trace's hash ids imply
            shares[sections.replay_workload] = implied
    if sections.prefix_bust:  # every request's prefix made unique: the design implies no hit at all
        s["prefix_cache_mode"] = "bust"
        shares = dict.fromkeys(shares, 0.0)
    if shares:  # what the workload meant the prefix cache to hit (the report sets the server's beside it)
        s["intended_prefix_share"] = shares
    if sections.client_bound:
        s["client_bound"] = client_bound_entries(sections.client_bound)
    if sections.verdicts:
        s["slo"] = verdict_entries(sections.verdicts)
    if sections.search is not None:
        s["search"] = search_with_stage_figures(sections.search, s)
    if sections.aborted is not None:
        s["aborted"] = sections.aborted
    if sections.provenance is not None:
        s["provenance"] = dict(sections.provenance)
    return s


def with_stage_timeline(s: Summary, timeline: Sequence[StageTimelineEntry]) -> None:
    """Copy each timeline stage's users, wall-clock window, warm-up, rate (and why it ended early,
    whether it settled) onto its entry in `stages`."""
    by_index = {t["index"]: t for t in timeline}
    for entry in s["stages"]:
        t = by_index.get(entry["stage"])
        if t is None:
            continue
        entry.update(
            users=t["users"],
            start_s=t["start_wall_s"],
            end_s=t["end_wall_s"],
            warmup_s=t["warmup_s"],
            rate=t["rate"],
        )
        if t["rate"] is not None and entry.get("duration_s"):  # the load sent beside the load asked
            entry["sent_rate"] = entry["total"]["requests"] / entry["duration_s"]
        if t.get("ended_by"):
            entry["ended_by"] = t["ended_by"]  # type: ignore[typeddict-item]
        if t.get("settled") is not None:  # the search's stages: steady before measured?
            entry["settled"] = t["settled"]  # type: ignore[typeddict-item]


def client_bound_entries(bound: Mapping[int, tuple[str, float]]) -> list[ClientBound]:
    """`client_bound`: one entry per stage a worker was client-bound in, by stage."""
    return [
        ClientBound(stage=stage, worker=worker, cpu_percent=round(pct, 1))
        for stage, (worker, pct) in sorted(bound.items())
    ]


def verdict_entries(verdicts: Sequence[Verdict]) -> list[VerdictEntry]:
    """`slo`: one entry per objective judged."""
    return [
        VerdictEntry(
            text=v.describe(),
            ok=v.ok,
            objective=v.objective.text,
            workload=v.objective.workload,
            metric=v.objective.metric,
            value=v.value,
        )
        for v in verdicts
    ]


def search_with_stage_figures(search: Mapping[str, Any], s: Summary) -> dict[str, Any]:
    """The search's result. The probes keep what the search judged live (a probe that ended
    before its QPS could be measured live takes its stage's QPS). The answer's QPS and TTFT p99
    stay those of the window its verdict was judged on: the stage's row in the table also
    counts requests that finished after the verdict, under the next stage's load, and could
    quote a figure that breaks the SLO the answer meets."""
    out = dict(search)
    stages = {e["stage"]: e["total"] for e in s["stages"]}
    out["probes"] = [
        p | {"qps": stages[p["stage"]]["qps"]} if p.get("qps") is None and p["stage"] in stages else p
        for p in out.get("probes") or []
    ]
    return out
