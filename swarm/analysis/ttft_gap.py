"""Client vs server TTFT on the same requests (swarm/analysis/client_server.py), read along the load:
`frontend_bound` (a gap growing with load into a large share of the client's TTFT), `network_delay`
(a steady gap at every load), else a plain `client_vs_server` line. By exact means: a gap growing to
>= 50 ms and >= 25% of the client's TTFT is the API front-end; a steady gap >= 20 ms at every load is
latency between client and server (steady: the largest within half again of the smallest). The
front-end's gap has to stay grown at every higher load: one stage's stall is no bottleneck.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import Finding, StageRow, prose_seconds
from swarm.core.server_families import family as family_of

FRONTEND_GAP_MIN = 0.05  # s: a mean client-engine TTFT gap under 50 ms is the HTTP path, not a bottleneck
FRONTEND_SHARE = 0.25  # ... and it must be this share of the client's TTFT to be the bottleneck
NETWORK_GAP_MIN = 0.02  # s: a steady gap above this at every load is latency between client and server
# ... steady: its largest stage's mean within half again of its smallest (the front-end's rule calls
# growth of half again a trend); a real vLLM whose API process shares two cores with its engine and
# the client ran 20 ms behind it at the lowest load and 35 ms at the highest: not a fixed latency
NETWORK_SPREAD_MAX = 0.5
NEGATIVE_GAP_MAX = 0.005  # s: a mean gap below minus this is not the same requests or not one clock


def stage_gaps(
    rows: Sequence[StageRow], pairs: Mapping[int, TtftComparison]
) -> list[tuple[StageRow, TtftComparison]]:
    """(row, comparison) of the stages, in `rows` order, whose comparison holds the same requests."""
    return [(r, pairs[r.stage]) for r in rows if r.stage in pairs and pairs[r.stage].mean_gap is not None]


def frontend_bound_at(
    gaps: Sequence[tuple[StageRow, TtftComparison]],
) -> tuple[StageRow, TtftComparison] | None:
    """The first stage, along the load, from which the client's first token waits on something
    between the engine and the client that grows with load: the mean gap (exact, the same
    requests) is at least FRONTEND_GAP_MIN and FRONTEND_SHARE of the client's TTFT there, it
    grew from the lowest load's by at least FRONTEND_GAP_MIN and by at least half again, and it
    stayed grown that much at every higher load. The engine made those tokens that much earlier:
    the wait is after it (HTTP front-end, SSE writing, the network or the client).
    Stayed: a front-end that holds the first token at one load holds it longer at a higher one;
    a gap that comes back down at a higher load was a passing stall (CPU taken from the API
    process for a few seconds on a shared machine: a real vLLM on two cores beside its client
    gave 22 ms at 2 users, 73 ms at 4, and 4-58 ms at every load in eight other runs), not a front-end that caps the
    load. A gap over the bar at the highest load alone still names it: nothing higher says no."""
    if len(gaps) < 2:
        return None
    low = max(gaps[0][1].mean_gap or 0.0, 0.0)
    grown = [(cmp.mean_gap or 0.0) - low >= max(FRONTEND_GAP_MIN, 0.5 * low) for _, cmp in gaps]
    for i, (row, cmp) in enumerate(gaps[1:], start=1):
        g = cmp.mean_gap or 0.0
        client = cmp.client.mean or 0.0
        if g >= FRONTEND_GAP_MIN and g >= FRONTEND_SHARE * client and all(grown[i:]):
            return row, cmp
    return None


def _gap_text(row: StageRow, cmp: TtftComparison) -> str:
    return (
        f"{prose_seconds(cmp.mean_gap)} at {row.label} (client {prose_seconds(cmp.client.mean)}, engine {prose_seconds(cmp.server.mean)}, "
        f"{cmp.client.count:,.0f} requests)"
    )


def ttft_gap_findings(
    rows: Sequence[StageRow],
    pairs: Mapping[int, TtftComparison],
    client_bound_stages: set[int] = frozenset(),
    *,
    source: str = "vllm",
) -> list[Finding]:
    """Client vs server TTFT on the same requests (swarm/analysis/client_server.py), read along
    the load: a gap that grows into a large share of the client's TTFT is `frontend_bound` (or,
    where the client's CPU was over the bar there, the client: said in the client_bound finding);
    a steady gap over NETWORK_GAP_MIN at every load (NETWORK_SPREAD_MAX) is `network_delay`; anything else is the
    HTTP/SSE path, said as a plain `client_vs_server` line. Means, not percentiles: a histogram's
    sum and count are exact, its percentiles are interpolated inside buckets up to 1.5 s wide.
    `source`: the server's family; one without a TTFT histogram (TGI) is said so, not compared."""
    fam = family_of(source)
    if not pairs and fam.lacks("ttft"):
        return [_no_server_ttft(fam.title)]
    gaps = stage_gaps(rows, pairs)
    if not gaps:
        return [_not_compared()] if pairs else []
    return [_gap_finding(gaps, client_bound_stages)]


def _no_server_ttft(title: str) -> Finding:
    return Finding(
        "client_vs_server",
        None,
        f"Client and server TTFT not compared: {title} exposes no TTFT histogram (server TTFT absent), "
        "so the TTFT figures are the client's only and a front-end or network wait cannot be told "
        "apart from the engine's.",
        trusted=False,
    )


def _not_compared() -> Finding:
    return Finding(
        "client_vs_server",
        None,
        "Client and server TTFT not compared: the client's records and the server's "
        "histogram did not hold the same requests in any stage (another client on this "
        "server, a proxy over several, or clocks apart).",
        trusted=False,
    )


def _gap_finding(gaps: Sequence[tuple[StageRow, TtftComparison]], client_bound_stages: set[int]) -> Finding:
    """The one finding the gaps make: clocks apart, the front-end, the network, else the plain gap."""
    values = [c.mean_gap or 0.0 for _, c in gaps]
    lo_row, lo = min(gaps, key=lambda p: p[1].mean_gap or 0.0)
    hi_row, hi = max(gaps, key=lambda p: p[1].mean_gap or 0.0)
    span = f"{prose_seconds(min(values))} to {prose_seconds(max(values))}"
    if min(values) < -NEGATIVE_GAP_MAX:
        return Finding(
            "client_vs_server",
            lo_row.stage,
            f"The client's mean TTFT is below the engine's at {lo_row.label} ({_gap_text(lo_row, lo)}): "
            "impossible for the same requests — the client's and server's clocks are apart.",
            trusted=False,
        )
    hit = frontend_bound_at(gaps)
    if hit is not None and hit[0].stage not in client_bound_stages:
        row, cmp = hit
        return Finding(
            "frontend_bound",
            row.stage,
            f"Between the engine and the client the first token waited {_gap_text(row, cmp)}, "
            f"against {_gap_text(gaps[0][0], gaps[0][1])}: the wait grows with load outside the engine, "
            "whose own TTFT histogram does not show it, so the server's API front-end (HTTP, "
            "detokenising, SSE writing on one process) is the bottleneck — add API server processes "
            "(vLLM --api-server-count) or replicas behind a router.",
        )
    if (
        hit is None
        and min(values) >= NETWORK_GAP_MIN
        and max(values) - min(values) < NETWORK_SPREAD_MAX * min(values)
    ):
        return Finding(
            "network_delay",
            None,
            f"Every request's first token reached the client {span} after "
            f"the engine made it ({_gap_text(hi_row, hi)}), with no trend with load: a fixed latency "
            "between client and server (the network, a proxy, TLS) adds that to every TTFT and E2E; "
            "it does not cap throughput.",
        )
    where = "" if hit is None else f" (at {hit[0].label} the worker's CPU was over the bar: the client's own)"
    return Finding(
        "client_vs_server",
        None,
        f"Client TTFT exceeds the engine's by {span} on the same requests "
        f"(mean gap per stage; largest at {hi_row.label}: client {prose_seconds(hi.client.mean)}, engine "
        f"{prose_seconds(hi.server.mean)} over {hi.client.count:,.0f} requests): the HTTP/SSE path between "
        f"them, no bottleneck{where}.",
    )
