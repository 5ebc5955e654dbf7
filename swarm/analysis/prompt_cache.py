"""The prompt cache, client against server: the prompt tokens the responses said were cached
(`usage.prompt_tokens_details.cached_tokens`) reconciled exactly with the server's counters
(llama.cpp's processed prompt tokens, vLLM's prefix-cache hits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swarm.analysis.finding import Finding
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.server_families import family as family_of
from swarm.core.units import percent_text
from swarm.stats.summary import Block


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
    if run_server.prompt_tokens is None:
        return []
    if not cache:
        return _flag_missing(run_server)
    said = CacheSaid(int(cache["prompt_tokens"]), int(cache["cached_tokens"]))
    cut = (
        int(client_total.get("cancelled") or 0)
        + int(client_total.get("cancelled_by_client") or 0)
        + sum((client_total.get("failures") or {}).values())
    )
    cause = _difference_cause(cut, missed_end)
    if run_server.source == "llamacpp":
        text = _llamacpp_text(run_server, said, cause)
    elif run_server.prefix_hits is not None:
        text = _hits_text(run_server.source, run_server.prefix_hits, said, cause)
    else:
        return []
    unreported = (
        int(client_total.get("requests", 0)) - cut - int(cache["requests"])
    )  # ok ones that did not say
    if unreported > 0:
        text += f" ({unreported:,} OK requests did not say how many of their prompt tokens were cached.)"
    return [Finding("client_vs_server", None, text)]


@dataclass(frozen=True)
class CacheSaid:
    """What the responses said: their prompt tokens and how many of them the server's cache served."""

    prompt: int
    cached: int

    @property
    def share(self) -> str:
        return percent_text(self.cached / self.prompt, 1) if self.prompt else "-"


def _flag_missing(run_server: StageServerStats) -> list[Finding]:
    """No response said its cached tokens: where vLLM's cache served some, how to make it say."""
    hits, prompt = run_server.prefix_hits, run_server.prompt_tokens
    if run_server.source != "vllm" or not hits or prompt is None:
        return []
    return [
        Finding(
            "client_vs_server",
            None,
            f"vLLM's prefix cache served {hits:,.0f} prompt tokens "
            f"({percent_text(hits / prompt, 1)} of {prompt:,.0f}), "
            f"but no response said how many of its own: start vLLM with "
            f"--enable-prompt-tokens-details to record cached tokens per request.",
        )
    ]


def _difference_cause(cut: int, missed_end: float | None) -> str:
    """Why the server's counter could exceed what the responses said."""
    if missed_end:
        return f"the last scrape came {missed_end:.1f} s before the client's last request finished"
    if cut:
        return (
            f"{cut:,} requests were cut or failed before their usage arrived (the server counts what it "
            f"did for them), or another client shares this server"
        )
    return "another client shares this server, or the target is a proxy over several servers"


def _llamacpp_text(run_server: StageServerStats, said: CacheSaid, cause: str) -> str:
    """The client's prompt tokens less the cached ones against llamacpp:prompt_tokens_total."""
    prompt, cached, share = said.prompt, said.cached, said.share
    processed_srv = (run_server.prompt_tokens or 0.0) - (run_server.prefix_hits or 0.0)
    processed = prompt - cached
    slack = run_server.processed_error
    if processed == processed_srv:
        return (
            f"Processed prompt tokens reconcile exactly: the client's {prompt:,} prompt tokens less the "
            f"{cached:,} llama.cpp said its prompt cache served ({share}) are {processed:,}, the increase "
            f"of llamacpp:prompt_tokens_total."
        )
    if abs(processed_srv - processed) <= slack:
        return (
            f"Processed prompt tokens reconcile to llama.cpp's printed precision: the client's {prompt:,} "
            f"prompt tokens less the {cached:,} its prompt cache served ({share}) are {processed:,}; "
            f"llamacpp:prompt_tokens_total grew by {processed_srv:,.0f}, and /metrics prints it with 6 "
            f"significant digits (up to {slack:,.0f} off here)."
        )
    return (
        f"Processed prompt tokens differ: the client's {prompt:,} prompt tokens less {cached:,} cached "
        f"are {processed:,}, llamacpp:prompt_tokens_total grew by {processed_srv:,.0f} "
        f"({processed_srv - processed:+,.0f}): {cause}."
    )


def _hits_text(source: str, hits: float, said: CacheSaid, cause: str) -> str:
    """The cached tokens the responses said against the family's prefix-hits counter
    (vllm:prefix_cache_hits_total, sglang:cached_tokens_total, trtllm_prompt_cached_tokens_total)."""
    prompt, cached = said.prompt, said.cached
    fam = family_of(source)
    counter = fam.metric("prefix_hits") or "the server's prefix-cache hits counter"
    if cached == hits:
        how = " (whole KV blocks, counted once per request)" if source == "vllm" else ""
        return (
            f"Cached prompt tokens reconcile exactly: the responses said {fam.title}'s prefix cache served "
            f"{cached:,} of their {prompt:,} prompt tokens ({said.share}), the increase of "
            f"{counter}{how}."
        )
    lower = (
        "a KV connector's hits (in cached_tokens, not in prefix_cache_hits)"
        if source == "vllm"
        else "the counter missed some the responses said (a request counted after the last scrape, "
        "or a counter that counts otherwise)"
    )
    why = cause if hits > cached else lower
    return (
        f"Cached prompt tokens differ: the responses said {cached:,} of their {prompt:,} prompt tokens "
        f"came from the prefix cache, {counter} grew by {hits:,.0f} "
        f"({hits - cached:+,.0f}): {why}."
    )
