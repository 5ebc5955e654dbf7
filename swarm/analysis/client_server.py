"""Client against server on the same requests: the client's TTFT re-windowed the way the server
observes it, set beside the server's histogram for the same window (pure functions).

vLLM observes `time_to_first_token_seconds` when the engine makes a request's first token; a
scrape-to-scrape histogram delta therefore holds the requests whose first token fell between two
scrapes. The client's stage statistics hold the requests *sent* in a stage. Comparing the two mixes
different requests (at a stage edge, or where TTFT is seconds long, most of them), so here the
client's records are re-windowed by the wall time they saw their first token
(`start_wall_s + ttft_s`) into the server's own window (`StageServerStats.first_ts` to `last_ts`).

What can be compared exactly and what cannot:
- the mean: a histogram's `_sum` / `_count` is exact, so the mean gap (client minus server, the
  same requests) is exact up to the few requests whose two first-token times straddle a scrape;
- percentiles: the server's is interpolated inside a histogram bucket, so it is given with that
  bucket's bounds: the client's exact percentile minus the server's is only known to within that
  bucket's width, and a gap below minus that width is no measurement but a defect (different
  requests on the two sides, or clocks apart).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from swarm.analysis.server_metrics import Histogram, ServerSnapshot, StageServerStats, histogram_delta
from swarm.stats.quantiles import PERCENTILES, quantile_bucket

COUNT_MATCH = 0.05  # client and server counts within 5% (+2): the two sides hold the same requests
GAP_QUANTILES = ("p50", "p99")


@dataclass(frozen=True)
class TtftSide:
    """One side's TTFT over the window: count, mean, and per quantile a value (and for the
    server the bucket (low, high) it was interpolated in; the client's is exact)."""

    count: float
    mean: float | None
    quantiles: dict[str, float | None]
    buckets: dict[str, tuple[float, float] | None]


@dataclass(frozen=True)
class TtftComparison:
    """Client vs server TTFT in one stage's server window, over the same requests."""

    stage: int
    start: float  # the server window (its two scrapes' wall times)
    end: float
    client: TtftSide  # exact, from the records
    server: TtftSide
    shift_s: float = 0.0  # the client's first-token times were taken this much earlier (the mean gap)

    @property
    def same_requests(self) -> bool:
        """Both sides counted the same requests (within 5% + 2): the comparison holds."""
        c, s = self.client.count, self.server.count
        return s > 0 and abs(c - s) <= COUNT_MATCH * max(c, s) + 2

    @property
    def mean_gap(self) -> float | None:
        """Client minus server mean TTFT (exact: histogram sum/count against the records)."""
        if not self.same_requests or self.client.mean is None or self.server.mean is None:
            return None
        return self.client.mean - self.server.mean

    def gap(self, q: str) -> float | None:
        """Client (exact) minus server (interpolated) at quantile `q`: known to within `width(q)`."""
        c, s = self.client.quantiles.get(q), self.server.quantiles.get(q)
        if not self.same_requests or c is None or s is None:
            return None
        return c - s

    def width(self, q: str) -> float | None:
        """Width of the server bucket holding quantile `q` (its resolution); None for +Inf."""
        b = self.server.buckets.get(q)
        if b is None or math.isinf(b[1]):
            return None
        return b[1] - b[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "window": [self.start, self.end],
            "shift_s": self.shift_s,
            "same_requests": self.same_requests,
            "client": {"count": self.client.count, "mean": self.client.mean, **self.client.quantiles},
            "server": {
                "count": self.server.count,
                "mean": self.server.mean,
                **self.server.quantiles,
                "buckets": {k: list(v) if v else None for k, v in self.server.buckets.items()},
            },
            "mean_gap": self.mean_gap,
            **{f"{q}_gap": self.gap(q) for q in GAP_QUANTILES},
            **{f"{q}_width": self.width(q) for q in GAP_QUANTILES},
        }


def _rank_value(ordered: Sequence[float], q: float) -> float | None:
    """The value at rank ceil(q * n): the observation whose bucket `histogram_quantile` reads for
    the q-quantile of n (rank q * n), so both sides name the same request (p99 of 12 is the 12th)."""
    if not ordered:
        return None
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


def compare_window(
    stage: int,
    start: float,
    end: float,
    client_ttfts: Sequence[float],
    server: Histogram,
    shift_s: float = 0.0,
) -> TtftComparison:
    """The comparison for one window, from the client's TTFTs of the requests whose first token
    came in (start, end] and the server's histogram delta over the same window."""
    values = sorted(client_ttfts)
    n = len(values)
    client = TtftSide(
        float(n),
        math.fsum(values) / n if n else None,
        {q: _rank_value(values, PERCENTILES[q]) for q in GAP_QUANTILES},
        dict.fromkeys(GAP_QUANTILES),
    )
    theirs = TtftSide(
        server.count,
        server.mean,
        {q: server.quantile(PERCENTILES[q]) for q in GAP_QUANTILES},
        {q: quantile_bucket(PERCENTILES[q], server.bounds, server.counts) for q in GAP_QUANTILES},
    )
    return TtftComparison(stage, start, end, client, theirs, shift_s)


def compare_ttft(
    records: Any, server: Mapping[int, StageServerStats], snapshots: Sequence[ServerSnapshot]
) -> dict[int, TtftComparison]:
    """stage -> comparison, for every stage whose server window has a TTFT histogram delta.

    `records`: the run's requests (a pandas DataFrame with `start_wall_s`, `ttft_s`); every record
    with a first token counts, whatever its outcome (the server observed it at its first token)."""
    if records is None or not len(records):
        return {}
    df = records[records["ttft_s"].notna()]
    first = (df["start_wall_s"] + df["ttft_s"]).to_numpy()
    ttft = df["ttft_s"].to_numpy()
    out: dict[int, TtftComparison] = {}
    for stage, s in server.items():
        if s.first_ts is None or s.last_ts is None:
            continue
        hist = histogram_delta(snapshots, "ttft", s.first_ts, s.last_ts)
        if hist is None:
            continue
        out[stage] = _aligned(stage, s.first_ts, s.last_ts, first, ttft, hist)
    return out


ALIGN_ROUNDS = 4


def _aligned(stage: int, start: float, end: float, first: Any, ttft: Any, hist: Histogram) -> TtftComparison:
    """The comparison with the client's first-token times shifted back by the mean gap: the
    server observed each first token when its engine made it, that much before the client read
    it. A gap of hundreds of ms (a saturated front-end) moves many requests across a few-second
    window; shifting by the mean gap and selecting again (a few rounds, until the selection stops
    changing) takes the requests the server counted in the window."""
    shift, chosen, cmp = 0.0, None, None
    for _ in range(ALIGN_ROUNDS):
        inside = (first - shift > start) & (first - shift <= end)
        if chosen is not None and (inside == chosen).all():
            break
        chosen = inside
        cmp = compare_window(stage, start, end, ttft[inside].tolist(), hist, shift)
        if cmp.client.mean is None or cmp.server.mean is None:
            break
        shift = max(0.0, cmp.client.mean - cmp.server.mean)
    assert cmp is not None
    if cmp.same_requests or cmp.server.count <= 0:
        return cmp
    late = _count_matching_shift(first, start, end, shift, cmp.server.count)
    if late is None or late == shift:
        return cmp
    inside = (first - late > start) & (first - late <= end)
    matched = compare_window(stage, start, end, ttft[inside].tolist(), hist, late)
    return matched if matched.same_requests else cmp


# How far the server's observation of a first token may trail (or lead) the client's reading of it
# beyond the mean TTFT gap: the histogram is observed when the server records its stats, which a
# busy server does after it has streamed the token (vLLM's output handler yields to the streaming
# tasks between output chunks and records the batch's stats after them), and a scrape's time is
# when its answer was read, up to a starved poller's delay after the server rendered it.
OBSERVATION_SKEW_MAX_S = 0.5


def _count_matching_shift(first: Any, start: float, end: float, shift: float, want: float) -> float | None:
    """The shift within OBSERVATION_SKEW_MAX_S of `shift` (the mean-gap one) whose window holds as
    many client first tokens as the server counted, the nearest to `shift` among those that do
    best; None when there are no first tokens. The count only changes where a first token crosses
    a window edge, so those crossings (and just past them) are the only candidates."""
    f = np.sort(np.asarray(first, dtype=float))
    if not len(f):
        return None
    lo, hi = shift - OBSERVATION_SKEW_MAX_S, shift + OBSERVATION_SKEW_MAX_S
    edges = np.concatenate((f - end, f - start))
    edges = edges[(edges >= lo) & (edges <= hi)]
    candidates = np.concatenate(([shift], edges, edges - 1e-6, edges + 1e-6))
    candidates = candidates[(candidates >= lo) & (candidates <= hi)]
    counts = np.searchsorted(f, end + candidates, side="right") - np.searchsorted(
        f, start + candidates, side="right"
    )
    miss = np.abs(counts - want)
    best = candidates[miss == miss.min()]
    return float(best[np.argmin(np.abs(best - shift))])
