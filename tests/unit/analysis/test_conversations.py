"""swarm/analysis/conversations.py: the report's per-turn rows and the server's prefix-cache hit
rate over time, from counters between scrapes."""

from __future__ import annotations

import pytest

from swarm.analysis.conversations import prefix_hit_over_time, turn_rows
from swarm.analysis.server_metrics import ServerSnapshot


def test_turn_rows_read_the_summarys_turn_buckets_and_tolerate_missing_figures():
    summary = {
        "sessions": {
            "turns": {
                "1": {
                    "requests": 10,
                    "ok": 9,
                    "prompt_tokens_mean": 120.0,
                    "ttft_s": {"p50": 0.2, "p99": 0.5},
                },
                "4+": {"requests": 3, "ok": 3},
            }
        }
    }
    assert turn_rows(summary) == [("1", 10, 9, 120.0, 0.2, 0.5), ("4+", 3, 3, None, None, None)]
    assert turn_rows({}) == []


def _snap(ts: float, queries: float | None, hits: float | None) -> ServerSnapshot:
    return ServerSnapshot(ts=ts, prefix_queries=queries, prefix_hits=hits)


def test_hit_rate_is_the_counters_difference_between_slice_ends():
    # 5 scrapes, unsorted, one without the counters (llama.cpp-like gaps are skipped, not zero)
    snaps = [
        _snap(130.0, 300.0, 180.0),
        _snap(100.0, 0.0, 0.0),
        _snap(110.0, 100.0, 10.0),
        _snap(115.0, None, None),
        _snap(120.0, 200.0, 100.0),
        _snap(140.0, 300.0, 180.0),  # nothing queried in the last slice
    ]
    rows = prefix_hit_over_time(snaps, t0=100.0, slices=10)  # at most one slice per scrape gap
    assert [(a, b) for a, b, _ in rows] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 40.0)]
    assert [r for _, _, r in rows] == [pytest.approx(0.1), pytest.approx(0.9), pytest.approx(0.8), None]
    two = prefix_hit_over_time(snaps, t0=100.0, slices=2)
    assert [(a, b) for a, b, _ in two] == [(0.0, 20.0), (20.0, 40.0)]
    assert two[0][2] == pytest.approx(100.0 / 200.0)
    assert prefix_hit_over_time([_snap(1.0, 5.0, 1.0)], t0=0.0) == []
