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
  < 80% (seed round 1: 64 running, KV 25%), a level no stage with more users exceeds and
  below which no stage queued;
- kv_bound: KV usage > 90% at its peak and >= 80% on average, with preemptions (or waiting
  requests held back);
- compute_bound: a saturated stage with neither of the above, whose engine held the users'
  requests (running + waiting >= 70% of the users); where it held fewer, the requests waited
  outside it: `frontend_bound` when the client's first token waits on the same requests grew with
  load (below), else `outside_engine`;
- frontend_bound / network_delay: client vs server TTFT on the same requests (re-windowed by
  first-token time, swarm/analysis/client_server.py), by exact means: a gap growing with load to
  >= 50 ms and >= 25% of the client's TTFT is the API front-end; a steady gap >= 20 ms at every
  load is latency between client and server;
- client_bound: a worker averaged > 90% of a core in a stage (`swarm.stats.cpu.cpu_limit()`, the bar
  the master judges live): the swarm measured itself, not trusted;
- slo_max_concurrency: the highest concurrency whose stage meets every SLO objective;
- client_vs_server: otherwise the gap's size, and request / token totals reconciled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.analysis.client_server import TtftComparison
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.units import percent_text, seconds_text, stage_name
from swarm.stats.cpu import ClientLoad
from swarm.stats.summary import Block, ClientBound, StageEntry

QPS_GROWTH_MIN = 0.05  # a stage whose QPS grows less than this (fraction) has plateaued
PINNED_SHARE = 0.8  # share of scrapes at the running max that counts as "pinned"
KV_LOW = 0.80
WAITING_MIN = 0.5  # mean requests waiting that counts as a queue (not a transient blip)
KV_HIGH = 0.90
RECONCILE_TOLERANCE = 0.01
ENGINE_SHARE_MIN = 0.7  # at the ceiling the engine holds at least this share of the users: its own limit
FRONTEND_GAP_MIN = 0.05  # s: a mean client-engine TTFT gap under 50 ms is the HTTP path, not a bottleneck
FRONTEND_SHARE = 0.25  # ... and it must be this share of the client's TTFT to be the bottleneck
NETWORK_GAP_MIN = 0.02  # s: a steady gap above this at every load is latency between client and server
NEGATIVE_GAP_MAX = 0.005  # s: a mean gap below minus this is not the same requests or not one clock


@dataclass
class StageRow:
    """Client-side numbers of one stage (a summary.json stage entry, flattened)."""

    stage: int  # 0-based index; labels say `stage_name(stage)` ("stage 1" for 0)
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
        return f"{self.users} users" if self.users is not None else stage_name(self.stage)


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


def _same_level(a: float, b: float) -> bool:
    return abs(a - b) <= max(1.0, 0.02 * max(a, b))


def capped_stages(rows: Sequence[StageRow], server: Mapping[int, StageServerStats]) -> set[int]:
    """Stages `is_capped`, where the level holds: every stage with more users (and server
    numbers) ran no more at once than it (within 2%, >= 1), and no stage with at most that many
    users had requests waiting (a cap admits such a load whole). A scheduler cap does not move
    with the load; a compute-bound server whose arrivals wait out long steps looks pinned at each
    load (3 running of 4 users with 1.5 waiting, 27 of 32 with 5.7) but at another level each
    time, with requests waiting at loads below the level."""
    out = set()
    for r in rows:
        s = server.get(r.stage)
        if s is None or not is_capped(s, r.users):
            continue
        higher = [
            server[h.stage].running_max
            for h in rows
            if h.stage in server
            and (h.users or 0) > (r.users or 0)
            and server[h.stage].running_max is not None
        ]
        # a cap at this level would have admitted a smaller load whole: requests waiting there
        # were waiting out the engine's steps (compute), not a scheduler limit
        admitted = [
            server[h.stage].waiting_mean or 0.0
            for h in rows
            if h.stage in server and h.users is not None and h.users <= s.running_max
        ]
        if all(v <= s.running_max or _same_level(v, s.running_max) for v in higher) and all(
            w < WAITING_MIN for w in admitted
        ):
            out.add(r.stage)
    return out


def is_kv_bound(s: StageServerStats) -> bool:
    """KV usage peaked over KV_HIGH and stayed high (mean >= KV_LOW: not a passing peak) while
    requests were preempted or waited."""
    return (
        s.kv_max is not None
        and s.kv_max > KV_HIGH
        and (s.kv_mean is None or s.kv_mean >= KV_LOW)
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


def engine_share(s: StageServerStats, users: int | None) -> float | None:
    """Share of the stage's users the engine held on average (running + waiting): in a closed
    loop every user's request is somewhere, and what the engine does not hold waits outside it
    (the front-end, the network, the client)."""
    if not users or s.running_mean is None:
        return None
    return (s.running_mean + (s.waiting_mean or 0.0)) / users


def _outside_text(row: StageRow, s: StageServerStats, share: float) -> str:
    return (
        f"At {row.label} QPS stopped growing while the engine held only {share * 100:.0f}% of the users' "
        f"requests ({s.running_mean or 0:.0f} running, {s.waiting_mean or 0:.1f} waiting on average): the "
        "ceiling is outside the engine — its API front-end, the network or the client — not its batch, "
        "KV cache or compute."
    )


def bottlenecks(
    rows: Sequence[StageRow],
    server: Mapping[int, StageServerStats],
    source: str = "vllm",
    *,
    explained: set[int] = frozenset(),
) -> list[Finding]:
    """max_num_seqs_cap / kv_bound at the first stage showing them; at the ceiling compute_bound
    where the engine held the users' requests, else `outside_engine`. `explained`: stages whose
    ceiling another finding already names (the client's CPU, the front-end): nothing is added
    there."""
    out: list[Finding] = []
    by_stage = {r.stage: r for r in rows}
    capped = capped_stages(rows, server)
    for kind, test, text in (
        ("max_num_seqs_cap", lambda r: r.stage in capped, lambda r, s: _cap_text(r, s, source)),
        ("kv_bound", lambda r: is_kv_bound(server[r.stage]), _kv_text),
    ):
        hits = [r for r in rows if r.stage in server and test(r)]
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
        inside = [engine_share(x, u) for x, u in pair]
        if (
            s is not None
            and s.samples
            and not any(r.stage in capped or is_kv_bound(server[r.stage]) for r in found if r.stage in server)
            and not explained & {r.stage for r in found}
        ):
            share = min((v for v in inside if v is not None), default=None)
            if share is not None and share < ENGINE_SHARE_MIN:
                out.append(Finding("outside_engine", top.stage, _outside_text(by_stage[top.stage], s, share)))
            else:
                out.append(Finding("compute_bound", top.stage, _compute_text(by_stage[top.stage], s)))
    return out


def cause_at(
    rows: Sequence[StageRow],
    server: Mapping[int, StageServerStats],
    stage: int,
    *,
    source: str = "vllm",
    ttft_pairs: Mapping[int, TtftComparison] | None = None,
    cpu: ClientLoad | None = None,
) -> Finding:
    """What held one stage (a search's answer), by the diagnosis' own rules and in its own
    sentences: the client's CPU, the KV cache, the scheduler cap, the front-end, a ceiling outside
    the engine, else compute. `rows` in load order."""
    by_stage = {r.stage: r for r in rows}
    row, s = by_stage[stage], server[stage]
    load = cpu if cpu is not None else ClientLoad()
    bound = load.bound()
    if stage in bound:
        return next(f for f in client_bound([row], load) if f.stage == stage)
    if is_kv_bound(s):
        return Finding("kv_bound", stage, _kv_text(row, s))
    if stage in capped_stages(rows, server):
        return Finding("max_num_seqs_cap", stage, _cap_text(row, s, source))
    upto = [r for r in rows if (r.users or 0) <= (row.users or 0)]
    front = frontend_bound_at(_gaps(upto, ttft_pairs or {}))
    if front is not None:
        return next(f for f in ttft_gap_findings(upto, ttft_pairs or {}) if f.kind == "frontend_bound")
    share = engine_share(s, row.users)
    if share is not None and share < ENGINE_SHARE_MIN:
        return Finding("outside_engine", stage, _outside_text(row, s, share))
    return Finding("compute_bound", stage, _compute_text(row, s))


# ---------------------------------------------------------------------------------------- client CPU


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


def _gaps(
    rows: Sequence[StageRow], pairs: Mapping[int, TtftComparison]
) -> list[tuple[StageRow, TtftComparison]]:
    """(row, comparison) of the stages, in `rows` order, whose comparison holds the same requests."""
    return [(r, pairs[r.stage]) for r in rows if r.stage in pairs and pairs[r.stage].mean_gap is not None]


def frontend_bound_at(
    gaps: Sequence[tuple[StageRow, TtftComparison]],
) -> tuple[StageRow, TtftComparison] | None:
    """The first stage, along the load, from which the client's first token waits on something
    between the engine and the client that grows with load: the mean gap (exact, the same
    requests) is at least FRONTEND_GAP_MIN and FRONTEND_SHARE of the client's TTFT there, and it
    grew from the lowest load's by at least FRONTEND_GAP_MIN and by at least half again.
    The engine made those tokens that much earlier: the wait is after it (HTTP front-end, SSE
    writing, the network or the client)."""
    if len(gaps) < 2:
        return None
    low = gaps[0][1].mean_gap or 0.0
    for row, cmp in gaps[1:]:
        g = cmp.mean_gap or 0.0
        client = cmp.client.mean or 0.0
        if (
            g >= FRONTEND_GAP_MIN
            and g >= FRONTEND_SHARE * client
            and g - max(low, 0.0) >= max(FRONTEND_GAP_MIN, 0.5 * max(low, 0.0))
        ):
            return row, cmp
    return None


def _gap_text(row: StageRow, cmp: TtftComparison) -> str:
    return (
        f"{_ms(cmp.mean_gap)} at {row.label} (client {_ms(cmp.client.mean)}, engine {_ms(cmp.server.mean)}, "
        f"{cmp.client.count:,.0f} requests)"
    )


def ttft_gap_findings(
    rows: Sequence[StageRow],
    pairs: Mapping[int, TtftComparison],
    client_bound_stages: set[int] = frozenset(),
) -> list[Finding]:
    """Client vs server TTFT on the same requests (swarm/analysis/client_server.py), read along
    the load: a gap that grows into a large share of the client's TTFT is `frontend_bound` (or,
    where the client's CPU was over the bar there, the client: said in the client_bound finding);
    a steady gap over NETWORK_GAP_MIN at every load is `network_delay`; anything smaller is the
    HTTP/SSE path, said as a plain `client_vs_server` line. Means, not percentiles: a histogram's
    sum and count are exact, its percentiles are interpolated inside buckets up to 1.5 s wide."""
    gaps = _gaps(rows, pairs)
    if not gaps:
        if pairs:
            return [
                Finding(
                    "client_vs_server",
                    None,
                    "Client and server TTFT not compared: the client's records and the server's "
                    "histogram did not hold the same requests in any stage (another client on this "
                    "server, a proxy over several, or clocks apart).",
                    trusted=False,
                )
            ]
        return []
    values = [c.mean_gap or 0.0 for _, c in gaps]
    lo_row, lo = min(gaps, key=lambda p: p[1].mean_gap or 0.0)
    hi_row, hi = max(gaps, key=lambda p: p[1].mean_gap or 0.0)
    out: list[Finding] = []
    if min(values) < -NEGATIVE_GAP_MAX:
        out.append(
            Finding(
                "client_vs_server",
                lo_row.stage,
                f"The client's mean TTFT is below the engine's at {lo_row.label} ({_gap_text(lo_row, lo)}): "
                "impossible for the same requests — the client's and server's clocks are apart.",
                trusted=False,
            )
        )
        return out
    hit = frontend_bound_at(gaps)
    if hit is not None and hit[0].stage not in client_bound_stages:
        row, cmp = hit
        out.append(
            Finding(
                "frontend_bound",
                row.stage,
                f"Between the engine and the client the first token waited {_gap_text(row, cmp)}, "
                f"against {_gap_text(gaps[0][0], gaps[0][1])}: the wait grows with load outside the engine, "
                "whose own TTFT histogram does not show it, so the server's API front-end (HTTP, "
                "detokenising, SSE writing on one process) is the bottleneck — add API server processes "
                "(vLLM --api-server-count) or replicas behind a router.",
            )
        )
        return out
    if hit is None and min(values) >= NETWORK_GAP_MIN and len(gaps) >= 1:
        out.append(
            Finding(
                "network_delay",
                None,
                f"Every request's first token reached the client {_ms(min(values))} to {_ms(max(values))} after "
                f"the engine made it ({_gap_text(hi_row, hi)}), with no trend with load: a fixed latency "
                "between client and server (the network, a proxy, TLS) adds that to every TTFT and E2E; "
                "it does not cap throughput.",
            )
        )
        return out
    where = "" if hit is None else f" (at {hit[0].label} the worker's CPU was over the bar: the client's own)"
    out.append(
        Finding(
            "client_vs_server",
            None,
            f"Client TTFT exceeds the engine's by {_ms(min(values))} to {_ms(max(values))} on the same requests "
            f"(mean gap per stage; largest at {hi_row.label}: client {_ms(hi.client.mean)}, engine "
            f"{_ms(hi.server.mean)} over {hi.client.count:,.0f} requests): the HTTP/SSE path between them, "
            f"no bottleneck{where}.",
        )
    )
    return out


def reconcile_totals(
    run_server: StageServerStats | None,
    client_total: Block | Mapping[str, Any],
    client_last_end: float | None = None,
) -> list[Finding]:
    """Request and token totals, client against server over the whole run, with one cause named
    where they differ. `client_last_end`: wall time the client's last request finished (scrape
    coverage)."""
    out: list[Finding] = []
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
    out += prompt_cache_vs_server(run_server, client_total, missed_end)
    return out


def prompt_cache_vs_server(
    run_server: StageServerStats, client_total: Block | Mapping[str, Any], missed_end: float | None = None
) -> list[Finding]:
    """The prompt tokens the server computed and those its cache served, reconciled exactly with
    what the responses said (`prompt_cache`: usage.prompt_tokens_details.cached_tokens).

    llama.cpp: `llamacpp:prompt_tokens_total` counts only the prompt tokens it processed, not those
    its prompt cache served (`prompt_tokens_cached_total`; server_metrics adds the two back into
    `prompt_tokens`). Each response's `cached_tokens` is its slot's `n_prompt_cached`, the number
    the cached counter adds, so client prompt tokens less cached ones equal the processed counter's
    increase, token for token.

    vLLM (0.32): `vllm:prefix_cache_hits_total` counts tokens, block granular: a hit is whole
    KV blocks (--block-size tokens; the last prompt token is always recomputed, so a fully cached
    prompt hits (prompt - 1) // block * block tokens), counted once per request when it is first
    admitted (a preempted request's later lookups go to unexported preempted_* counters). The
    response's `cached_tokens` (with --enable-prompt-tokens-details) is that same first hit, plus
    any KV-connector hits (`vllm:external_prefix_cache_hits_total`). So without a KV connector, and
    with every request read to its end, the sum of `cached_tokens` equals the hits counter's
    increase exactly; a request cut before its usage arrived adds to the counter only.
    """
    cache = client_total.get("prompt_cache")
    hits = run_server.prefix_hits
    if run_server.prompt_tokens is None:
        return []
    if not cache:
        if run_server.source == "vllm" and hits:
            return [
                Finding(
                    "client_vs_server",
                    None,
                    f"vLLM's prefix cache served {hits:,.0f} prompt tokens "
                    f"({percent_text(hits / run_server.prompt_tokens, 1)} of {run_server.prompt_tokens:,.0f}), "
                    f"but no response said how many of its own: start vLLM with "
                    f"--enable-prompt-tokens-details to record cached tokens per request.",
                )
            ]
        return []
    reported, cached, prompt = (
        int(cache["requests"]),
        int(cache["cached_tokens"]),
        int(cache["prompt_tokens"]),
    )
    share = percent_text(cached / prompt, 1) if prompt else "-"
    cut = int(client_total.get("cancelled") or 0) + sum((client_total.get("failures") or {}).values())
    unreported = int(client_total.get("requests", 0)) - cut - reported  # ok ones that did not say
    cause = (
        f"the last scrape came {missed_end:.1f} s before the client's last request finished"
        if missed_end
        else f"{cut:,} requests were cut or failed before their usage arrived (the server counts what it "
        f"did for them), or another client shares this server"
        if cut
        else "another client shares this server, or the target is a proxy over several servers"
    )
    if run_server.source == "llamacpp":
        processed_srv = run_server.prompt_tokens - (hits or 0.0)
        processed = prompt - cached
        slack = run_server.processed_error
        if processed == processed_srv:
            text = (
                f"Processed prompt tokens reconcile exactly: the client's {prompt:,} prompt tokens less the "
                f"{cached:,} llama.cpp said its prompt cache served ({share}) are {processed:,}, the increase "
                f"of llamacpp:prompt_tokens_total."
            )
        elif abs(processed_srv - processed) <= slack:
            text = (
                f"Processed prompt tokens reconcile to llama.cpp's printed precision: the client's {prompt:,} "
                f"prompt tokens less the {cached:,} its prompt cache served ({share}) are {processed:,}; "
                f"llamacpp:prompt_tokens_total grew by {processed_srv:,.0f}, and /metrics prints it with 6 "
                f"significant digits (up to {slack:,.0f} off here)."
            )
        else:
            text = (
                f"Processed prompt tokens differ: the client's {prompt:,} prompt tokens less {cached:,} cached "
                f"are {processed:,}, llamacpp:prompt_tokens_total grew by {processed_srv:,.0f} "
                f"({processed_srv - processed:+,.0f}): {cause}."
            )
    elif hits is not None:
        if cached == hits:
            text = (
                f"Cached prompt tokens reconcile exactly: the responses said vLLM's prefix cache served "
                f"{cached:,} of their {prompt:,} prompt tokens ({share}), the increase of "
                f"vllm:prefix_cache_hits_total (whole KV blocks, counted once per request)."
            )
        else:
            why = (
                cause
                if hits > cached
                else "a KV connector's hits (in cached_tokens, not in prefix_cache_hits)"
            )
            text = (
                f"Cached prompt tokens differ: the responses said {cached:,} of their {prompt:,} prompt tokens "
                f"came from the prefix cache, vllm:prefix_cache_hits_total grew by {hits:,.0f} "
                f"({hits - cached:+,.0f}): {why}."
            )
    else:
        return []
    if unreported > 0:
        text += f" ({unreported:,} OK requests did not say how many of their prompt tokens were cached.)"
    return [Finding("client_vs_server", None, text)]


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
    ttft_pairs: Mapping[int, TtftComparison] | None = None,
) -> list[Finding]:
    """Every finding for a run, in reading order: trust, ceiling, cause, SLO, client vs server.
    `cpu`: the workers' CPU per stage (client_cpu.jsonl); without it, `bound_reported`
    (summary.json's `client_bound`, the master's live judgement of the same reports).
    `ttft_pairs`: client vs server TTFT on the same requests per stage (`compare_ttft`)."""
    # by_load: a search probes loads out of order; the ceiling is read along the load, not the clock
    rows = sorted(rows, key=lambda r: ((r.users or 0) if by_load else 0, r.stage))
    load = cpu if cpu is not None else ClientLoad()
    findings = client_bound(rows, load) if load else client_bound_reported(rows, bound_reported)
    untrusted = {f.stage for f in findings if f.stage is not None}
    sat = saturation(rows, untrusted)
    if sat:
        findings.append(sat)
    has_server = bool(server) and any(s.samples for s in server.values())
    gap = ttft_gap_findings(rows, ttft_pairs or {}, untrusted) if has_server else []
    frontend = [f for f in gap if f.kind == "frontend_bound"]
    if has_server:
        explained = untrusted | ({r.stage for r in rows} if frontend else set())
        findings += bottlenecks(rows, server, source, explained=explained)
        findings += frontend
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
        findings += [f for f in gap if f.kind != "frontend_bound"]
        findings += reconcile_totals(run_server, client_total or {}, client_last_end)
    return findings
