"""Conversations (chat_session) in the report: per-turn figures from summary.json and the target's
prefix-cache hit rate over time from its /metrics scrapes (pure: values in, rows out).

The per-turn table answers "does the prefix cache keep TTFT flat as the history grows?": prompt
tokens rise with the turn, and TTFT should not when the previous turn's prompt is still cached.
The hit rate over time is the server's own counters (vLLM `prefix_cache_hits / queries`, llama.cpp's
cached prompt tokens) between scrapes, in equal slices of the run.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from swarm.analysis.server_metrics import ServerSnapshot

HIT_RATE_SLICES = 10


def turn_rows(
    summary: Mapping[str, Any],
) -> list[tuple[str, int, int, float | None, float | None, float | None]]:
    """(turn, requests, ok, mean prompt tokens, TTFT p50 s, TTFT p99 s) per turn bucket."""
    turns = (summary.get("sessions") or {}).get("turns") or {}
    out = []
    for key, b in turns.items():
        ttft = b.get("ttft_s") or {}
        out.append(
            (
                key,
                int(b.get("requests", 0)),
                int(b.get("ok", 0)),
                b.get("prompt_tokens_mean"),
                ttft.get("p50"),
                ttft.get("p99"),
            )
        )
    return out


def prefix_hit_over_time(
    snapshots: Sequence[ServerSnapshot], t0: float, slices: int = HIT_RATE_SLICES
) -> list[tuple[float, float, float | None]]:
    """(from s, to s after `t0`, hit rate) over `slices` equal runs of scrapes: hits / queries between
    the scrapes at each slice's ends (None where no prompt token was queried)."""
    snaps = sorted(
        (s for s in snapshots if s.prefix_queries is not None and s.prefix_hits is not None),
        key=lambda s: s.ts,
    )
    if len(snaps) < 2:
        return []
    n = min(slices, len(snaps) - 1)
    ends = [round(i * (len(snaps) - 1) / n) for i in range(n + 1)]
    out = []
    for i, j in itertools.pairwise(ends):
        a, b = snaps[i], snaps[j]
        dq = (b.prefix_queries or 0.0) - (a.prefix_queries or 0.0)
        dh = (b.prefix_hits or 0.0) - (a.prefix_hits or 0.0)
        out.append((a.ts - t0, b.ts - t0, dh / dq if dq > 0 else None))
    return out
