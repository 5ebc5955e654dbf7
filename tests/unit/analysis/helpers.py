"""Hand-built stage tables for the diagnosis' tests, with the seed's numbers (REFERENCE.md §1):
client rows, server statistics, client vs server TTFT pairs."""

from __future__ import annotations

from swarm.analysis.client_server import TtftComparison, compare_window
from swarm.analysis.finding import StageRow
from swarm.analysis.server_metrics import Histogram, StageServerStats
from swarm.core.buckets import VLLM_TTFT_BUCKETS as TTFT_BUCKETS

CHAT = [(10, 4.7, 0.172), (30, 15.1, 0.209), (64, 22.9, 0.255), (128, 29.1, 0.458), (200, 32.2, 0.694)]


def rows(table, t0=1000.0, stage_s=30.0):
    out = []
    for i, (users, qps, p99) in enumerate(table):
        block = {
            "requests": int(qps * stage_s),
            "failures": {},
            "qps": qps,
            "ttft_s": {"p50": p99 / 2, "p99": p99},
            "e2e_s": {"p99": p99 * 8},
        }
        out.append(
            StageRow(
                stage=i,
                users=users,
                start_s=t0 + i * stage_s,
                end_s=t0 + (i + 1) * stage_s,
                duration_s=stage_s,
                requests=block["requests"],
                qps=qps,
                ttft_p50=p99 / 2,
                ttft_p99=p99,
                entry={"stage": i, "total": block},
            )
        )
    return out


def stats(stage, **kw):
    """A stage's server numbers; a queue given by its mean alone was steady (its median the same)."""
    if "waiting_mean" in kw:
        kw.setdefault("waiting_median", kw["waiting_mean"])
    s = StageServerStats(stage=stage, samples=30, duration_s=30.0)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def ttft_pair(stage: int, client_ttfts: list[float], engine_ttfts: list[float]) -> TtftComparison:
    """A comparison from per-request TTFTs: the server's histogram built from the engine's."""
    bounds = (*TTFT_BUCKETS, float("inf"))
    cum = [float(sum(v <= b for v in engine_ttfts)) for b in bounds]
    hist = Histogram(bounds, tuple(cum), sum(engine_ttfts), float(len(engine_ttfts)))
    return compare_window(stage, 0.0, 1.0, client_ttfts, hist)


def gap_run(gaps_s: list[float], share: list[float] | None = None):
    """Three stages of 64/128/256 users; engine TTFT 100-300 ms; the client's = engine's + gap."""
    r = rows([(64, 40.0, 0.2), (128, 60.0, 0.4), (256, 61.0, 0.9)])
    engine = [[0.1 + 0.002 * i for i in range(100)] for _ in r]
    pairs = {i: ttft_pair(i, [e + gaps_s[i] for e in engine[i]], engine[i]) for i in range(len(r))}
    share = share or [0.95, 0.95, 0.95]
    server = {
        i: stats(
            i,
            running_mean=share[i] * row.users,
            running_max=share[i] * row.users,
            running_pinned=0.3,
            waiting_mean=0.0,
            kv_max=0.3,
        )
        for i, row in enumerate(r)
    }
    return r, server, pairs


def kinds_of(found) -> set[str]:
    return {f.kind for f in found}
