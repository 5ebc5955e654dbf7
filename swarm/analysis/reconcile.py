"""Client against server over the whole run: request and output-token totals reconciled, with one
cause named where they differ (`client_vs_server` findings), then the prompt cache's
(swarm/analysis/prompt_cache.py). A total whose server figures failed a sanity check
(swarm/analysis/server_trust.py) is not reconciled: the finding says which check failed instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.analysis.finding import Finding
from swarm.analysis.prompt_cache import prompt_cache_vs_server
from swarm.analysis.server_metrics import StageServerStats
from swarm.analysis.server_trust import CACHE_FIGURES, FAMILY, REQUEST_FIGURES, TOKEN_FIGURES, failure_text
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
    # cancelled requests (by the stop or, with --cancel, by their client) never reach the server's
    # success counter (a client abort: REFERENCE.md §9)
    hung_up = int(client_total.get("cancelled_by_client") or 0)
    ok = int(client_total.get("requests", 0)) - failed - int(client_total.get("cancelled") or 0) - hung_up
    out_tokens = int(client_total.get("output_tokens") or 0)
    doubt, texts = unchecked(run_server, out_tokens > 0, bool(client_total.get("prompt_cache")))
    out = [Finding("client_vs_server", None, text, trusted=False) for text in texts]
    if run_server.requests is not None and "requests" not in doubt:
        restarts = run_server.resets.get("requests", 0)
        text = _requests_text(ok, failed, run_server.requests, missed_end, restarts)
        out.append(Finding("client_vs_server", None, text))
    if hung_up:
        out.append(Finding("client_vs_server", None, hang_up_text(hung_up, run_server)))
    if run_server.generation_tokens is not None and out_tokens and "tokens" not in doubt:
        text = _tokens_text(out_tokens, run_server.generation_tokens, missed_end)
        out.append(Finding("client_vs_server", None, text))
    if "cache" in doubt:
        return out
    return out + prompt_cache_vs_server(run_server, client_total, missed_end)


def unchecked(run_server: StageServerStats, has_tokens: bool, has_cache: bool) -> tuple[set[str], list[str]]:
    """What is not reconciled because the server's figures for it failed a sanity check (of
    requests, tokens, cache) and the sentences saying which check (one for all three where its
    /metrics mixed families)."""
    failed, source = run_server.failed, run_server.source
    if FAMILY in failed:
        why = failure_text(failed, {FAMILY}, source)
        return {"requests", "tokens", "cache"}, [f"Totals not reconciled with the server's: {why}."]
    doubt, texts = set(), []
    for key, what, figures, asked in (
        ("requests", "Requests", REQUEST_FIGURES, True),
        ("tokens", "Output tokens", TOKEN_FIGURES, has_tokens),
        ("cache", "The prompt cache", CACHE_FIGURES, has_cache),
    ):
        why = failure_text(failed, figures, source)
        if why:
            doubt.add(key)
            if asked:
                texts.append(
                    f"{what} not reconciled with the server's: its /metrics failed a sanity check ({why})."
                )
    return doubt, texts


def hang_up_text(hung_up: int, run_server: StageServerStats) -> str:
    """The requests whose client hung up (--cancel) beside the aborts the server counted, where its
    /metrics counts them (SGLang's num_aborted_requests_total); vLLM counts a client's abort nowhere."""
    head = f"The client hung up on {hung_up:,} requests (--cancel, cancelled_by_client)"
    if run_server.aborts is not None:
        same = "the same number" if run_server.aborts == hung_up else f"{run_server.aborts - hung_up:+,.0f}"
        return f"{head}; the server counted {run_server.aborts:,.0f} aborted requests ({same})."
    if run_server.source == "vllm":
        return (
            f"{head}; vLLM aborts them and frees their KV blocks but counts a client's abort in no "
            "counter (request_success_total leaves them out), so they are apart from its finished requests."
        )
    return f"{head}; the server's /metrics has no count of aborted requests to set beside them."


def _requests_text(ok: int, failed: int, srv: float, missed_end: float | None, restarts: int = 0) -> str:
    """The client's OK requests against the server's finished ones, and the cause where they differ
    (`restarts`: times the server's counter went back, read as a restart from 0)."""
    diff = srv - ok
    tol = max(1.0, RECONCILE_TOLERANCE * max(ok, 1))
    across = f" across {restarts} restart{'s' if restarts > 1 else ''} of its counter" if restarts else ""
    if abs(diff) <= tol:
        return f"Requests reconcile: the client recorded {ok:,} OK, the server counted {srv:,.0f} finished{across}."
    if diff < 0 and restarts:
        return (
            f"The client recorded {ok:,} OK requests but the server counted only {srv:,.0f} finished "
            f"({-diff:,.0f} fewer){across}: what it finished between its last scrape before a restart and "
            "the restart is in no count."
        )
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
