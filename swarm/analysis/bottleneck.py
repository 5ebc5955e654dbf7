"""What holds the ceiling, from the server's statistics per stage: the scheduler's cap
(`max_num_seqs_cap`), the KV cache (`kv_bound`), the engine's compute (`compute_bound`) or something
outside the engine (`outside_engine`); `cause_at` says the one cause of a single stage (a search's answer).
The rules read only the normalised fields of `StageServerStats`, whatever the family; the sentences
quote the family's own metric names and knobs (swarm/core/server_families.py), and a field the
family lacks is said absent, never read as 0. A family with no running, waiting or KV gauge at all
(TensorRT-LLM's older collector) gets `no_server_metrics` at the ceiling, not a guess.

- max_num_seqs_cap: running requests pinned at one level (>= 80% of scrapes within 2% of the
  stage's max) below the stage's users while requests wait (mean >= 0.5) and KV usage stays
  < 80% (seed round 1: 64 running, KV 25%), a level no stage with more users exceeds and
  below which no stage queued (more than the arrivals between two steps: 10% of its users);
- kv_bound: KV usage > 90% at its peak and >= 80% on average, with preemptions (or waiting
  requests held back);
- compute_bound: a saturated stage with neither of the above, whose engine held the users'
  requests (running + waiting >= 70% of the users); where it held fewer, the requests waited
  outside it (`outside_engine`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swarm.analysis.ceiling import ceiling
from swarm.analysis.client_bound import client_bound
from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.server_metrics import StageServerStats
from swarm.analysis.server_trust import CAUSE_FIGURES, failed_stages, withheld
from swarm.analysis.ttft_gap import frontend_bound_at, stage_gaps, ttft_gap_findings
from swarm.core.server_families import Family
from swarm.core.server_families import family as family_of
from swarm.core.units import percent_text
from swarm.stats.cpu import ClientLoad

PINNED_SHARE = 0.8  # share of scrapes at the running max that counts as "pinned"
KV_LOW = 0.80
WAITING_MIN = 0.5  # mean requests waiting that counts as a queue (not a transient blip)
ADMITTED_WAIT_SHARE = 0.1  # below a cap's level, waiting beyond this share of the users is a queue
KV_HIGH = 0.90
ENGINE_SHARE_MIN = 0.7  # at the ceiling the engine holds at least this share of the users: its own limit


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
    numbers) ran no more at once than it (within 2%, >= 1), and no stage with fewer users than
    that had a queue (a cap admits such a load whole: at most the arrivals between two steps wait,
    under 10% of its users; seed round 1's sweep: 0.85 of 32 and 1.8 of 60 under a cap of 64). A
    scheduler cap does not move with the load; a compute-bound server whose arrivals wait out long steps looks pinned at each
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
        # a cap at this level would have admitted a smaller load whole: a queue there (more than
        # the arrivals between two steps, most of the stage: not the spawn wave one scrape caught)
        # was waiting out the engine's steps (compute), not a scheduler limit. A load of exactly the
        # level is not judged: its users fill every slot, so each arrival races the release of the
        # slot it takes, and a small level's one racing request is half its users (a fresh-clone
        # CI's llama-server with 2 slots queued at 2 users in most scrapes and the cap went unnamed)
        queued_below = [
            h.stage
            for h in rows
            if h.stage in server
            and h.users is not None
            and h.users < s.running_max
            and (server[h.stage].waiting_median or 0.0) >= max(WAITING_MIN, ADMITTED_WAIT_SHARE * h.users)
        ]
        if all(v <= s.running_max or _same_level(v, s.running_max) for v in higher) and not queued_below:
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


def _kv_state(s: StageServerStats, fam: Family) -> str:
    """The KV side of a sentence: its figures with the family's metric, or that it is absent."""
    if s.kv_max is None:
        return (
            f"KV usage absent ({fam.title} exposes no such gauge)"
            if fam.lacks("kv_usage")
            else "KV usage not scraped in the stage"
        )
    return (
        f"{fam.kv_what} only {percent_text(s.kv_mean)} (max {percent_text(s.kv_max)}{fam.named('kv_usage')})"
    )


def _cap_text(row: StageRow, s: StageServerStats, fam: Family) -> str:
    return (
        f"At {row.label} running requests sat pinned at {s.running_max:.0f} (mean {s.running_mean:.1f}"
        f"{fam.named('running')}) while {s.waiting_mean:.1f} waited on average ({fam.metric('waiting') or 'waiting'}) "
        f"and {_kv_state(s, fam)}: {fam.cap_knob} is the limit, not the GPU — raise it."
    )


def _preempted(s: StageServerStats, fam: Family) -> str:
    if s.preemptions is None:
        return f"no {fam.preempt_word[:-1]} counter"
    return f"{s.preemptions:.0f} {fam.preempt_word} ({fam.metric('preemptions')})"


def _kv_text(row: StageRow, s: StageServerStats, fam: Family) -> str:
    why = (
        _preempted(s, fam)
        if (s.preemptions or 0) > 0
        else f"{s.waiting_mean:.1f} requests waiting on average ({fam.metric('waiting') or 'waiting'})"
    )
    return (
        f"At {row.label} the server was KV-bound: {fam.kv_what} peaked at {percent_text(s.kv_max)} (mean "
        f"{percent_text(s.kv_mean)}{fam.named('kv_usage')}) with {why} and {s.running_mean or 0:.0f} running: "
        f"{fam.kv_advice}."
    )


def _compute_text(row: StageRow, s: StageServerStats, fam: Family) -> str:
    gen = "-" if s.generation_tok_s is None else f"{s.generation_tok_s:,.0f}"
    kv = "KV usage absent" if s.kv_max is None else f"{fam.kv_what} {percent_text(s.kv_max)} max"
    return (
        f"At {row.label} the server was compute/bandwidth-bound: {s.running_mean or 0:.0f} running with no "
        f"cap pinned, {kv} and {_preempted(s, fam)}, yet "
        f"QPS stopped growing at {gen} generated tok/s: more throughput needs quantisation, speculative "
        f"decoding or more GPUs."
    )


def _no_gauges_text(row: StageRow, fam: Family) -> str:
    return (
        f"At {row.label} QPS stopped growing, but {fam.title}'s metrics hold no running, waiting or KV "
        "gauges (absent): what holds the ceiling (scheduler cap, KV cache, compute) cannot be told "
        "from the server side."
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
    fam = family_of(source)
    by_stage = {r.stage: r for r in rows}
    capped = capped_stages(rows, server)
    for kind, test, text in (
        ("max_num_seqs_cap", lambda r: r.stage in capped, lambda r, s: _cap_text(r, s, fam)),
        ("kv_bound", lambda r: is_kv_bound(server[r.stage]), lambda r, s: _kv_text(r, s, fam)),
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
            if s.running_mean is None and s.kv_max is None:  # nothing to judge the engine by
                out.append(Finding("no_server_metrics", top.stage, _no_gauges_text(by_stage[top.stage], fam)))
            elif share is not None and share < ENGINE_SHARE_MIN:
                out.append(Finding("outside_engine", top.stage, _outside_text(by_stage[top.stage], s, share)))
            else:
                out.append(Finding("compute_bound", top.stage, _compute_text(by_stage[top.stage], s, fam)))
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
    fam = family_of(source)
    load = cpu if cpu is not None else ClientLoad()
    bound = load.bound()
    if stage in bound:
        return next(f for f in client_bound([row], load) if f.stage == stage)
    bad = failed_stages(rows, server, CAUSE_FIGURES)
    if bad:  # a figure the rules read (here or at a load they compare with) failed a sanity check
        return withheld(bad, CAUSE_FIGURES, ["the cause at this load"], source)
    if is_kv_bound(s):
        return Finding("kv_bound", stage, _kv_text(row, s, fam))
    if stage in capped_stages(rows, server):
        return Finding("max_num_seqs_cap", stage, _cap_text(row, s, fam))
    upto = [r for r in rows if (r.users or 0) <= (row.users or 0)]
    front = frontend_bound_at(stage_gaps(upto, ttft_pairs or {}))
    if front is not None:
        return next(f for f in ttft_gap_findings(upto, ttft_pairs or {}) if f.kind == "frontend_bound")
    share = engine_share(s, row.users)
    if s.running_mean is None and s.kv_max is None:
        return Finding("no_server_metrics", stage, _no_gauges_text(row, fam))
    if share is not None and share < ENGINE_SHARE_MIN:
        return Finding("outside_engine", stage, _outside_text(row, s, share))
    return Finding("compute_bound", stage, _compute_text(row, s, fam))
