"""Client against server over the whole run: request and output-token totals reconciled, with one
cause named where they differ (`client_vs_server` findings), then the prompt cache's
(swarm/analysis/prompt_cache.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.analysis.finding import Finding
from swarm.analysis.prompt_cache import prompt_cache_vs_server
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.units import percent_text
from swarm.stats.summary import Block

RECONCILE_TOLERANCE = 0.01


def reconcile_totals(
    run_server: StageServerStats | None,
    client_total: Block | Mapping[str, Any],
    client_last_end: float | None = None,
) -> list[Finding]:
    """Request and token totals, client against server over the whole run, with one cause named
    where they differ. `client_last_end`: wall time the client's last request finished (scrape
    coverage)."""
    if run_server is None or run_server.duration_s is None:
        return []
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
    texts = []
    if run_server.requests is not None:
        texts.append(_requests_text(ok, failed, run_server.requests, missed_end))
    out_tokens = int(client_total.get("output_tokens") or 0)
    if run_server.generation_tokens is not None and out_tokens:
        texts.append(_tokens_text(out_tokens, run_server.generation_tokens, missed_end))
    out = [Finding("client_vs_server", None, text) for text in texts]
    return out + prompt_cache_vs_server(run_server, client_total, missed_end)


def _requests_text(ok: int, failed: int, srv: float, missed_end: float | None) -> str:
    """The client's OK requests against the server's finished ones, and the cause where they differ."""
    diff = srv - ok
    tol = max(1.0, RECONCILE_TOLERANCE * max(ok, 1))
    if abs(diff) <= tol:
        return f"Requests reconcile: the client recorded {ok:,} OK, the server counted {srv:,.0f} finished."
    if diff > 0 and failed >= diff:
        return (
            f"The server counted {srv:,.0f} finished requests, {diff:,.0f} more than the client's {ok:,} OK: "
            f"the client marked them failed ({failed:,} failures — timeouts, cut or bad streams), so the "
            f"difference is the network or the client, not the server."
        )
    if diff > 0:
        return (
            f"The server counted {srv:,.0f} finished requests, {diff:,.0f} more than the client recorded "
            f"({ok:,} OK, {failed:,} failed): lost data on the client side (missing records) or another "
            f"client sharing this server."
        )
    if missed_end:
        return (
            f"The client recorded {ok:,} OK requests but the server counted only {srv:,.0f} finished "
            f"({-diff:,.0f} fewer): lost data on the server side — the last scrape came {missed_end:.1f} s "
            f"before the client's last request finished."
        )
    return (
        f"The client recorded {ok:,} OK requests but the server counted only {srv:,.0f} finished "
        f"({-diff:,.0f} fewer): lost data on the server side — the target is likely a proxy over "
        f"several servers of which one was scraped, or it restarted."
    )


def _tokens_text(out_tokens: int, srv_tok: float, missed_end: float | None) -> str:
    """The client's output tokens against the server's generated ones, and the cause where they differ."""
    rel = srv_tok / out_tokens - 1.0
    if abs(rel) <= RECONCILE_TOLERANCE:
        return f"Output tokens reconcile: client {out_tokens:,} vs server {srv_tok:,.0f} generated."
    if rel > 0:
        return (
            f"The server generated {srv_tok:,.0f} tokens, {percent_text(rel, 1)} more than the client's "
            f"{out_tokens:,}: tokens of requests the client gave up on (failed or cut) or lost client "
            f"records."
        )
    why = (
        "the last scrape missed the run's end"
        if missed_end
        else "client counts from chunks rather than server usage, or a proxy over several servers"
    )
    return (
        f"The client counted {out_tokens:,} output tokens, {percent_text(-rel, 1)} more than the server's "
        f"{srv_tok:,.0f}: lost data on the server side ({why})."
    )
