"""The one quantile module: exact percentiles, sketch and histogram quantiles, stat blocks, rates.

Three kinds of quantile, one place:
- exact, over raw values (`percentile`, `latency_stats`: requests.parquet, tests);
- from a latency sketch (`sketch_stats`: summary.json, the web UI, SLOs), within the sketch's
  relative accuracy of the exact one;
- from a Prometheus histogram (`histogram_quantile`, as Prometheus interpolates;
  `quantile_bucket`, the bucket that holds it: the server's /metrics and the live line).
No I/O, no Locust.

Percentile definition used everywhere in the swarm: **nearest rank, lower** — the p-th percentile
of n samples is the sorted sample at index floor(p * (n - 1)), i.e. numpy's
`np.percentile(x, 100 * p, method="lower")`. It is always a value that was measured (no
interpolation between two requests), and it is the rank DDSketch's `get_quantile_value` targets,
so the sketches in swarm.stats.aggregate estimate exactly this value within their relative error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

# summary key -> quantile
PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
STAT_KEYS: tuple[str, ...] = (*PERCENTILES, "mean", "max")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Exact nearest-rank-lower percentile (0 <= q <= 1); None for no values."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} not in [0, 1]")
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def latency_stats(values: Sequence[float]) -> dict[str, float | None]:
    """Exact p50/p90/p95/p99/mean/max of `values` (the summary's block, computed without sketches)."""
    if not values:
        return dict.fromkeys(STAT_KEYS)
    ordered = sorted(values)
    n = len(ordered)
    out: dict[str, float | None] = {k: ordered[math.floor(q * (n - 1))] for k, q in PERCENTILES.items()}
    out["mean"] = math.fsum(ordered) / n
    out["max"] = ordered[-1]
    return out


class Sketch(Protocol):
    """What `sketch_stats` reads (swarm/stats/sketch.py `LatencyStats`)."""

    @property
    def count(self) -> int: ...
    @property
    def mean(self) -> float | None: ...
    @property
    def max(self) -> float: ...
    def quantile(self, q: float) -> float | None: ...


def sketch_stats(sketch: Sketch) -> dict[str, float | None]:
    """p50/p90/p95/p99 (sketch estimates), mean and max (exact) of one latency: a summary block."""
    out: dict[str, float | None] = {k: sketch.quantile(q) for k, q in PERCENTILES.items()}
    out["mean"] = sketch.mean
    out["max"] = sketch.max if sketch.count else None
    return out


def tpot_s(ttft_s: float | None, e2e_s: float | None, output_tokens: int) -> float | None:
    """Time per output token after the first: (E2E - TTFT) / (output_tokens - 1), as vLLM bench."""
    if ttft_s is None or e2e_s is None or output_tokens < 2:
        return None
    return (e2e_s - ttft_s) / (output_tokens - 1)


def rate(count: float, duration_s: float | None) -> float:
    """Events per second over a measured duration; 0.0 when there is no duration."""
    if not duration_s or duration_s <= 0:
        return 0.0
    return count / duration_s


def error_rate(requests: int, failures: int, cancelled: int = 0) -> float | None:
    """Failed / requests that ran to an end (cancelled ones are neither); None when there are none."""
    ended = requests - cancelled
    return failures / ended if ended > 0 else None


def relative_error(estimate: float, exact: float) -> float:
    """|estimate - exact| / |exact| (0 when both are 0)."""
    if exact == 0:
        return 0.0 if estimate == 0 else math.inf
    return abs(estimate - exact) / abs(exact)


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> float | None:
    """Prometheus' `histogram_quantile`: linear interpolation inside the bucket holding rank q*n.

    `bounds` ascending with +Inf last, `counts` cumulative. None where Prometheus gives NaN (no
    observations, no +Inf bucket, fewer than two buckets). A rank in the +Inf bucket gives the
    highest finite bound; the first bucket interpolates from 0 (from its bound when that is <= 0).
    """
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(bounds) < 2 or not math.isinf(bounds[-1]) or len(bounds) != len(counts):
        return None
    cum, running = [], 0.0
    for c in counts:  # like Prometheus: force monotonic counts (scrape races between buckets)
        running = max(running, c)
        cum.append(running)
    total = cum[-1]
    if not math.isfinite(total) or total <= 0:  # NaN or Inf counts (a server's /metrics): no rank
        return None
    rank = q * total
    b = next((i for i in range(len(cum) - 1) if cum[i] >= rank), len(cum) - 1)
    if b == len(cum) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], cum[b]
    if b > 0:
        start = bounds[b - 1]
        count -= cum[b - 1]
        rank -= cum[b - 1]
    if count <= 0:
        return end
    return start + (end - start) * (rank / count)


def quantile_bucket(
    q: float, bounds: Sequence[float], cumulative: Sequence[float]
) -> tuple[float, float] | None:
    """The bucket (lower, upper bound) holding the q-quantile (0 <= q <= 1) of a cumulative
    histogram: all that buckets can say of it (`histogram_quantile` interpolates inside it, a
    guess). None without observations, or with counts that hold no rank (NaN, Inf)."""
    if len(bounds) != len(cumulative) or not bounds or not math.isfinite(cumulative[-1]):
        return None
    if cumulative[-1] <= 0:
        return None
    rank = q * cumulative[-1]
    i = next((i for i, c in enumerate(cumulative) if c >= rank), None)
    if i is None:  # a NaN count on the way: no bucket can be said to hold the rank
        return None
    return (bounds[i - 1] if i else 0.0), bounds[i]


def bucket_width(bounds: Sequence[float], value: float | None) -> float | None:
    """Width of the bucket `value` falls in: how finely a histogram percentile can resolve it."""
    if value is None:
        return None
    for i, b in enumerate(bounds):
        if value <= b:
            return b - (bounds[i - 1] if i else 0.0)
    return math.inf
