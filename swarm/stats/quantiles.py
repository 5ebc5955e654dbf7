"""Pure metric maths: exact percentiles, latency statistics, rates. No I/O, no Locust.

Percentile definition used everywhere in the swarm: **nearest rank, lower** — the p-th percentile
of n samples is the sorted sample at index floor(p * (n - 1)), i.e. numpy's
`np.percentile(x, 100 * p, method="lower")`. It is always a value that was measured (no
interpolation between two requests), and it is the rank DDSketch's `get_quantile_value` targets,
so the sketches in swarm.stats.aggregate estimate exactly this value within their relative error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def error_rate(requests: int, failures: int) -> float | None:
    """Failed / all requests; None when nothing was sent."""
    return failures / requests if requests else None


def relative_error(estimate: float, exact: float) -> float:
    """|estimate - exact| / |exact| (0 when both are 0)."""
    if exact == 0:
        return 0.0 if estimate == 0 else math.inf
    return abs(estimate - exact) / abs(exact)
