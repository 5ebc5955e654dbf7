"""Diagnosis of a capacity sweep: where the ceiling is and what holds it there (pure functions).

`diagnose` reads every rule in turn and returns the findings in reading order; each rule lives in
its own module: the ceiling (swarm/analysis/ceiling.py), the client's CPU (client_bound.py), the
server's bottleneck (bottleneck.py), client vs server TTFT (ttft_gap.py), the SLO answer
(slo_answer.py), totals and the prompt cache reconciled (reconcile.py, prompt_cache.py); their
vocabulary, `StageRow` and `Finding`, is swarm/analysis/finding.py.

Inputs are per-stage client rows (`StageRow`, from summary.json stage entries, see
swarm/analysis/rundir.py's `stage_rows`), per-stage server statistics
(`swarm.analysis.server_metrics.StageServerStats`) and the workers' CPU per stage
(`swarm.stats.cpu.ClientLoad`). Output: `Finding`s, each one sentence carrying the numbers behind it.

Rules (thresholds are module constants):
- saturation: the first stage after which QPS grows < 5% while TTFT p99 grows is the ceiling
  (the seed's "64.9 vs 64.7 QPS" at 200 -> 256 users);
- max_num_seqs_cap, kv_bound, compute_bound (or, where the engine held fewer of the users'
  requests, `frontend_bound` when the client's first token waits grew with load, below, else
  `outside_engine`): the server's bottleneck, by the rules in swarm/analysis/bottleneck.py;
- frontend_bound / network_delay: client vs server TTFT on the same requests (re-windowed by
  first-token time, swarm/analysis/client_server.py), by exact means: a gap growing with load to
  >= 50 ms and >= 25% of the client's TTFT is the API front-end; a steady gap >= 20 ms at every
  load is latency between client and server;
- client_bound: a worker averaged > 90% of a core in a stage (`swarm.stats.cpu.cpu_limit()`, the bar
  the master judges live): the swarm measured itself, not trusted;
- slo_max_concurrency: the highest concurrency whose stage meets every SLO objective;
- client_vs_server: otherwise the gap's size, and request / token totals reconciled;
- server_check_failed: in place of the cause or the TTFT gap where the server figures they read
  failed a sanity check (swarm/analysis/server_trust.py: NaN, Inf, negative, several families);
  server_counter_reset: counters that went back, read as a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from swarm.analysis.bottleneck import bottlenecks
from swarm.analysis.ceiling import saturation
from swarm.analysis.client_bound import client_bound, client_bound_reported
from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.reconcile import reconcile_totals
from swarm.analysis.send_lag import late_sends
from swarm.analysis.server_metrics import StageServerStats
from swarm.analysis.server_trust import (
    CAUSE_FIGURES,
    TTFT_FIGURES,
    BadStage,
    failed_stages,
    resets_finding,
    withheld,
)
from swarm.analysis.slo_answer import slo_max_concurrency
from swarm.analysis.ttft_gap import ttft_gap_findings
from swarm.stats.cpu import ClientLoad
from swarm.stats.summary import Block, ClientBound


def diagnose(
    rows: Sequence[StageRow],
    server: Mapping[int, StageServerStats] | None = None,
    *,
    source: str = "vllm",
    cpu: ClientLoad | None = None,
    slo_text: str | None = None,
    run_server: StageServerStats | None = None,
    client_total: Block | Mapping[str, Any] | None = None,
    client_last_end: float | None = None,
    bound_reported: Iterable[ClientBound | Mapping[str, Any]] = (),
    by_load: bool = False,
    ttft_pairs: Mapping[int, TtftComparison] | None = None,
    unobservable: str | None = None,
) -> list[Finding]:
    """Every finding for a run, in reading order: trust, ceiling, cause, SLO, client vs server.
    `cpu`: the workers' CPU per stage (client_cpu.jsonl); without it, `bound_reported`
    (summary.json's `client_bound`, the master's live judgement of the same reports).
    `ttft_pairs`: client vs server TTFT on the same requests per stage (`compare_ttft`).
    `source`: the server's family (core/server_families.py), whose metric names the sentences quote.
    `unobservable`: why the server side was not scraped (the poller's reason: a 404, a forced
    family whose names were not there, `--server-family none`), said in the `no_server_metrics`
    finding; without server statistics the findings are the client's own signals only."""
    # by_load: a search probes loads out of order; the ceiling is read along the load, not the clock
    rows = sorted(rows, key=lambda r: ((r.users or 0) if by_load else 0, r.stage))
    load = cpu if cpu is not None else ClientLoad()
    findings = client_bound(rows, load) if load else client_bound_reported(rows, bound_reported)
    findings += late_sends(rows)
    untrusted = {f.stage for f in findings if f.stage is not None}
    sat = saturation(rows, untrusted)
    if sat:
        findings.append(sat)
    has_server = bool(server) and any(s.samples for s in server.values())
    server = server or {}
    bad_ttft = failed_stages(rows, server, TTFT_FIGURES)
    bad_cause = failed_stages(rows, server, CAUSE_FIGURES)
    gap = (
        ttft_gap_findings(rows, ttft_pairs or {}, untrusted, source=source)
        if has_server and not bad_ttft
        else []
    )
    frontend = [f for f in gap if f.kind == "frontend_bound"]
    if has_server:
        explained = untrusted | ({r.stage for r in rows} if frontend else set())
        if bad_cause or bad_ttft:
            findings.append(_withheld(bad_cause, bad_ttft, source))
        if not bad_cause:
            findings += bottlenecks(rows, server, source, explained=explained)
        findings += frontend
    else:
        findings.append(not_observable(unobservable))
    if slo_text:
        f = slo_max_concurrency(rows, slo_text)
        if f:
            findings.append(f)
    if has_server:
        findings += [f for f in gap if f.kind != "frontend_bound"]
        findings += reconcile_totals(run_server, client_total or {}, client_last_end)
        reset = resets_finding(run_server, source)
        if reset:
            findings.append(reset)
    return findings


def _withheld(bad_cause: Sequence[BadStage], bad_ttft: Sequence[BadStage], source: str) -> Finding:
    """One finding for what the figures that failed a check withhold: the ceiling's cause, the
    client vs server TTFT, or both."""
    what = [
        w for w, bad in (("the ceiling's cause", bad_cause), ("the client vs server TTFT", bad_ttft)) if bad
    ]
    stages = {r.stage: (r, s) for r, s in (*bad_cause, *bad_ttft)}
    bad = sorted(stages.values(), key=lambda rs: (rs[0].users or 0, rs[0].stage))
    figures = (CAUSE_FIGURES if bad_cause else frozenset()) | (TTFT_FIGURES if bad_ttft else frozenset())
    return withheld(bad, figures, what, source)


def not_observable(reason: str | None) -> Finding:
    """The finding of a run without server statistics: why, and that the client's signals are all
    the diagnosis has."""
    return Finding(
        "no_server_metrics",
        None,
        f"Server side not observable ({reason or 'no server metrics were scraped'}): the diagnosis uses "
        "the client's own signals only (its TTFT, ITL, errors and the concurrency it holds); the "
        "cause of any ceiling (scheduler cap, KV cache, compute) cannot be told from them.",
    )
