"""Diagnosis of a capacity sweep: where the ceiling is and what holds it there (pure functions).

Inputs are per-stage client rows (`StageRow`, from summary.json stage entries, see
swarm/analysis/rundir.py's `stage_rows`), per-stage server statistics
(`swarm.analysis.server_metrics.StageServerStats`) and the workers' CPU per stage
(`swarm.stats.cpu.ClientLoad`). Output: `Finding`s, each one sentence carrying the numbers behind it.

Rules (thresholds are module constants):
- saturation: the first stage after which QPS grows < 5% while TTFT p99 grows is the ceiling
  (the seed's "64.9 vs 64.7 QPS" at 200 -> 256 users);
- max_num_seqs_cap: running requests pinned at one level (>= 80% of scrapes within 2% of the
  stage's max) below the stage's users while requests wait (mean >= 0.5) and KV usage stays
  < 80% (seed round 1: 64 running, KV 25%);
- kv_bound: KV usage > 90% with preemptions (or waiting requests held back);
- compute_bound: a saturated stage with neither of the above;
- client_bound: a worker averaged > 90% of a core in a stage (`swarm.stats.cpu.cpu_limit()`, the bar
  the master judges live): the swarm measured itself, not trusted;
- slo_max_concurrency: the highest concurrency whose stage meets every SLO objective;
- client_vs_server: client TTFT vs server TTFT, and request / token totals reconciled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.analysis.server_metrics import StageServerStats
from swarm.core.units import percent_text, seconds_text
from swarm.stats.cpu import CLIENT_CPU_MAX as CLIENT_CPU_MAX  # re-exported: the default bar
from swarm.stats.cpu import ClientLoad, cpu_limit
from swarm.stats.summary import Block, ClientBound, StageEntry

QPS_GROWTH_MIN = 0.05  # a stage whose QPS grows less than this (fraction) has plateaued
PINNED_SHARE = 0.8  # share of scrapes at the running max that counts as "pinned"
KV_LOW = 0.80
WAITING_MIN = 0.5  # mean requests waiting that counts as a queue (not a transient blip)
KV_HIGH = 0.90
RECONCILE_TOLERANCE = 0.01


@dataclass
class StageRow:
    """Client-side numbers of one stage (a summary.json stage entry, flattened)."""

    stage: int
    users: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    warmup_s: float = 0.0
    duration_s: float | None = None
    requests: int = 0
    failures: int = 0
    cancelled: int = 0  # cut by the swarm's own stop: neither ok nor failed
    qps: float | None = None
    output_tok_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p99: float | None = None
    tpot_p50: float | None = None
    itl_p99: float | None = None
    # the raw stage entry ({"total": block, ...}) for SLOs; an older file's entry may differ
    entry: StageEntry | dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.users} users" if self.users is not None else f"stage {self.stage}"


@dataclass(frozen=True)
class Finding:
    kind: str  # saturation | no_saturation | max_num_seqs_cap | kv_bound | compute_bound | client_bound
    #            | slo_max_concurrency | client_vs_server | no_server_metrics
    stage: int | None
    text: str
    trusted: bool = True


def _ms(v: float | None) -> str:
    """A duration in prose: "85 ms", "12.3 s"."""
    return seconds_text(v, sep=" ")


def _growth(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old <= 0:
        return None
    return new / old - 1.0


# ---------------------------------------------------------------------------------------- saturation


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
            f"No ceiling reached: from {a.label} to {b.label} QPS still went {_num(a.qps)} -> "
            f"{_num(b.qps)} ({grew}); extend the sweep to find the ceiling.",
        )
    prev, cur = found
    qg, tg = _growth(cur.qps, prev.qps), _growth(cur.ttft_p99, prev.ttft_p99)
    doubt = prev.stage in untrusted or cur.stage in untrusted
    tail = " (but the client was CPU-bound there: the plateau may be the swarm's own)" if doubt else ""
    return Finding(
        "saturation",
        prev.stage,
        f"Ceiling at {prev.label}: going to {cur.label} moved QPS {_num(prev.qps)} -> {_num(cur.qps)} "
        f"({qg * 100:+.1f}%) while TTFT p99 rose {_ms(prev.ttft_p99)} -> {_ms(cur.ttft_p99)} "
        f"({tg * 100:+.0f}%): more users only queue{tail}.",
        trusted=not doubt,
    )


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


# ---------------------------------------------------------------------------------------- bottlenecks


def is_capped(s: StageServerStats, users: int | None = None) -> bool:
    """Running pinned below the offered concurrency while requests queue and KV has room."""
    return (
        s.running_pinned is not None
        and s.running_pinned >= PINNED_SHARE
        and (s.running_max or 0) >= 1
        and (users is None or s.running_max < users)  # running == users is the client's own limit
        and (s.waiting_mean or 0) >= WAITING_MIN
        and (s.kv_max is None or s.kv_max < KV_LOW)
    )


def is_kv_bound(s: StageServerStats) -> bool:
    return (
        s.kv_max is not None
        and s.kv_max > KV_HIGH
        and ((s.preemptions or 0) > 0 or (s.waiting_mean or 0) > 0)
    )


def _cap_text(row: StageRow, s: StageServerStats, source: str) -> str:
    knob = "the --parallel slot count" if source == "llamacpp" else "the scheduler's --max-num-seqs cap"
    kv = (
        "KV usage not exposed"
        if s.kv_max is None
        else f"KV-cache usage only {percent_text(s.kv_mean)} (max {percent_text(s.kv_max)})"
    )
    return (
        f"At {row.label} running requests sat pinned at {s.running_max:.0f} (mean {s.running_mean:.1f}) while "
        f"{s.waiting_mean:.1f} waited on average and {kv}: {knob} is the limit, not the GPU — raise it."
    )


def _kv_text(row: StageRow, s: StageServerStats) -> str:
    why = (
        f"{s.preemptions:.0f} preemptions"
        if (s.preemptions or 0) > 0
        else f"{s.waiting_mean:.1f} requests waiting on average"
    )
    return (
        f"At {row.label} the server was KV-bound: KV-cache usage peaked at {percent_text(s.kv_max)} (mean "
        f"{percent_text(s.kv_mean)}) with {why} and {s.running_mean or 0:.0f} running: shorten --max-model-len "
        f"or quantise the KV cache (--kv-cache-dtype fp8)."
    )


def _compute_text(row: StageRow, s: StageServerStats) -> str:
    gen = "-" if s.generation_tok_s is None else f"{s.generation_tok_s:,.0f}"
    return (
        f"At {row.label} the server was compute/bandwidth-bound: {s.running_mean or 0:.0f} running with no "
        f"cap pinned, KV-cache usage {percent_text(s.kv_max)} max and {s.preemptions or 0:.0f} preemptions, yet "
        f"QPS stopped growing at {gen} generated tok/s: more throughput needs quantisation, speculative "
        f"decoding or more GPUs."
    )


def bottlenecks(
    rows: Sequence[StageRow],
    server: Mapping[int, StageServerStats],
    source: str = "vllm",
) -> list[Finding]:
    """max_num_seqs_cap / kv_bound at the first stage showing them; compute_bound at the ceiling."""
    out: list[Finding] = []
    by_stage = {r.stage: r for r in rows}
    for kind, test, text in (
        ("max_num_seqs_cap", is_capped, lambda r, s: _cap_text(r, s, source)),
        ("kv_bound", lambda s, _users: is_kv_bound(s), _kv_text),
    ):
        hits = [r for r in rows if r.stage in server and test(server[r.stage], r.users)]
        if hits:
            first = hits[0]
            sentence = text(first, server[first.stage])
            if len(hits) > 1:
                sentence = sentence[:-1] + f" (also at {', '.join(h.label for h in hits[1:])})."
            out.append(Finding(kind, first.stage, sentence))
    found = ceiling(rows)
    if found is not None:  # judged on the ceiling stage and the next one, where the queue shows
        top = found[0]
        s = server.get(top.stage)
        pair = [(server[r.stage], r.users) for r in found if r.stage in server]
        if s is not None and s.samples and not any(is_capped(x, u) or is_kv_bound(x) for x, u in pair):
            out.append(Finding("compute_bound", top.stage, _compute_text(by_stage[top.stage], s)))
    return out


# ---------------------------------------------------------------------------------------- client CPU


def _where(rows: Sequence[StageRow], stage: int) -> str:
    by_stage = {r.stage: r for r in rows}
    return by_stage[stage].label if stage in by_stage else f"stage {stage + 1}"


def client_bound(rows: Sequence[StageRow], load: ClientLoad) -> list[Finding]:
    """Stages where a worker averaged over the CPU bar: `load.bound()`, the judgement the master
    makes live (`cpu_limit()`: 90% of a core unless $SWARM_CLIENT_CPU_MAX says otherwise), from
    each worker's own CPU and wall seconds in the stage (client_cpu.jsonl)."""
    return [
        _bound(stage, f"At {_where(rows, stage)} {worker} averaged {pct:.0f}% CPU")
        for stage, (worker, pct) in sorted(load.bound().items())
    ]


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
            f"At {_where(rows, int(e['stage']))} {e['worker']} averaged {float(e['cpu_percent']):.0f}% CPU "
            f"(its own reports)",
        )
        for e in entries
    ]


# ---------------------------------------------------------------------------------------- SLO


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
        f"Highest concurrency meeting {slo_text}: {best.label} ({_num(best.qps)} QPS, TTFT p99 "
        f"{_ms(best.ttft_p99)}){tail}.",
    )


# ---------------------------------------------------------------------------------------- client vs server


def ttft_gap(row: StageRow, s: StageServerStats | None) -> tuple[float | None, float | None]:
    """(client - server) TTFT at p50 and p99, seconds."""
    server = (s.latency.get("ttft") if s else None) or {}
    p50 = None if row.ttft_p50 is None or server.get("p50") is None else row.ttft_p50 - server["p50"]
    p99 = None if row.ttft_p99 is None or server.get("p99") is None else row.ttft_p99 - server["p99"]
    return p50, p99


def client_vs_server(
    rows: Sequence[StageRow],
    server: Mapping[int, StageServerStats],
    run_server: StageServerStats | None,
    client_total: Block | Mapping[str, Any],
    cpu_max: Mapping[int, float] | None = None,
    client_last_end: float | None = None,
) -> list[Finding]:
    """TTFT gap across stages, and request / token totals reconciled with one cause named.

    A server percentile is interpolated inside a histogram bucket, so a gap change smaller than
    that bucket's width (vLLM's TTFT buckets are 0.25/0.5/0.75 s wide above 0.1 s) is not read as
    a trend. `cpu_max`: stage -> the busiest worker's mean CPU % (`ClientLoad.by_stage()`).
    `client_last_end`: wall time the client's last request finished (scrape coverage).
    """
    out = []
    gaps = [(r, ttft_gap(r, server.get(r.stage))[0]) for r in rows]
    gaps = [(r, g) for r, g in gaps if g is not None]
    if gaps:
        first, last = gaps[0], gaps[-1]
        lo, hi = min(g for _, g in gaps), max(g for _, g in gaps)
        width = (server[last[0].stage].latency.get("ttft") or {}).get("p50_width") or 0.0
        cpu_top = max((cpu_max or {}).values(), default=None)
        if len(gaps) > 1 and last[1] > 2 * max(first[1], 0.005) and last[1] - first[1] > max(0.02, width):
            cause = (
                f"the client (worker CPU reached {cpu_top:.0f}%)"
                if cpu_top is not None and cpu_top > cpu_limit()
                else "the server's HTTP front-end (tokenising, detokenising, SSE) or the network"
                + ("" if cpu_top is None else f" — worker CPU stayed at or under {cpu_top:.0f}%")
            )
            out.append(
                Finding(
                    "client_vs_server",
                    last[0].stage,
                    f"Client TTFT p50 exceeds the server's by {_ms(first[1])} at {first[0].label} but "
                    f"{_ms(last[1])} at {last[0].label}: the gap grows with load, so it is {cause}.",
                )
            )
        else:
            coarse = (
                f" (server percentiles are interpolated in histogram buckets up to {_ms(width)} wide here)"
                if width > 0.02
                else ""
            )
            # A negative gap is no measurement: the client sees every token after the server made
            # it; it is the server's percentile, interpolated inside a wide histogram bucket.
            spread = (
                f"exceeds the server's by {_ms(lo)} to {_ms(hi)}"
                if lo >= 0
                else f"minus the server's ranges from {_ms(lo)} to {_ms(hi)} (below zero only through the "
                f"server's bucket interpolation)"
            )
            out.append(
                Finding(
                    "client_vs_server",
                    None,
                    f"Client TTFT p50 {spread} across stages, no "
                    f"trend with load: the network and HTTP/SSE overhead between client and engine"
                    f"{coarse}.",
                )
            )
    if run_server is None or run_server.duration_s is None:
        return out
    missed_end = (
        client_last_end - run_server.last_ts
        if client_last_end is not None
        and run_server.last_ts is not None
        and client_last_end > run_server.last_ts
        else None
    )
    failed = sum((client_total.get("failures") or {}).values())
    # cancelled requests never reach the server's success counter (a client abort: REFERENCE.md §9)
    ok = int(client_total.get("requests", 0)) - failed - int(client_total.get("cancelled") or 0)
    if run_server.requests is not None:
        srv = run_server.requests
        diff = srv - ok
        tol = max(1.0, RECONCILE_TOLERANCE * max(ok, 1))
        if abs(diff) <= tol:
            text = (
                f"Requests reconcile: the client recorded {ok:,} OK, the server counted {srv:,.0f} finished."
            )
        elif diff > 0 and failed >= diff:
            text = (
                f"The server counted {srv:,.0f} finished requests, {diff:,.0f} more than the client's {ok:,} OK: "
                f"the client marked them failed ({failed:,} failures — timeouts, cut or bad streams), so the "
                f"difference is the network or the client, not the server."
            )
        elif diff > 0:
            text = (
                f"The server counted {srv:,.0f} finished requests, {diff:,.0f} more than the client recorded "
                f"({ok:,} OK, {failed:,} failed): lost data on the client side (missing records) or another "
                f"client sharing this server."
            )
        elif missed_end:
            text = (
                f"The client recorded {ok:,} OK requests but the server counted only {srv:,.0f} finished "
                f"({-diff:,.0f} fewer): lost data on the server side — the last scrape came {missed_end:.1f} s "
                f"before the client's last request finished."
            )
        else:
            text = (
                f"The client recorded {ok:,} OK requests but the server counted only {srv:,.0f} finished "
                f"({-diff:,.0f} fewer): lost data on the server side — the target is likely a proxy over "
                f"several servers of which one was scraped, or it restarted."
            )
        out.append(Finding("client_vs_server", None, text))
    out_tokens = int(client_total.get("output_tokens") or 0)
    if run_server.generation_tokens is not None and out_tokens:
        srv_tok = run_server.generation_tokens
        rel = srv_tok / out_tokens - 1.0
        if abs(rel) <= RECONCILE_TOLERANCE:
            text = f"Output tokens reconcile: client {out_tokens:,} vs server {srv_tok:,.0f} generated."
        elif rel > 0:
            text = (
                f"The server generated {srv_tok:,.0f} tokens, {percent_text(rel, 1)} more than the client's "
                f"{out_tokens:,}: tokens of requests the client gave up on (failed or cut) or lost client "
                f"records."
            )
        else:
            why = (
                "the last scrape missed the run's end"
                if missed_end
                else "client counts from chunks rather than server usage, or a proxy over several servers"
            )
            text = (
                f"The client counted {out_tokens:,} output tokens, {percent_text(-rel, 1)} more than the server's "
                f"{srv_tok:,.0f}: lost data on the server side ({why})."
            )
        out.append(Finding("client_vs_server", None, text))
    return out


# ---------------------------------------------------------------------------------------- all


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
) -> list[Finding]:
    """Every finding for a run, in reading order: trust, ceiling, cause, SLO, client vs server.
    `cpu`: the workers' CPU per stage (client_cpu.jsonl); without it, `bound_reported`
    (summary.json's `client_bound`, the master's live judgement of the same reports)."""
    # by_load: a search probes loads out of order; the ceiling is read along the load, not the clock
    rows = sorted(rows, key=lambda r: ((r.users or 0) if by_load else 0, r.stage))
    load = cpu if cpu is not None else ClientLoad()
    findings = client_bound(rows, load) if load else client_bound_reported(rows, bound_reported)
    untrusted = {f.stage for f in findings if f.stage is not None}
    sat = saturation(rows, untrusted)
    if sat:
        findings.append(sat)
    has_server = bool(server) and any(s.samples for s in server.values())
    if has_server:
        findings += bottlenecks(rows, server, source)
    else:
        findings.append(
            Finding(
                "no_server_metrics",
                None,
                "No server metrics were scraped: the cause of any ceiling (scheduler cap, KV "
                "cache, compute) cannot be told from the client side alone.",
            )
        )
    if slo_text:
        f = slo_max_concurrency(rows, slo_text)
        if f:
            findings.append(f)
    if has_server:
        findings += client_vs_server(
            rows, server, run_server, client_total or {}, load.by_stage(), client_last_end
        )
    return findings
