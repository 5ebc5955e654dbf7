"""Derived figures held to ground truth: the report's per-stage server numbers against the
simulator's per-request trace, client against server on the same requests, and every named
bottleneck against the server's own gauges (issue: answers you can trust)."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def _stages_csv(out: Path) -> dict[int, dict[str, str]]:
    with open(out / "stages.csv") as f:
        return {int(r["stage"]): r for r in csv.DictReader(f)}


def assert_server_figures_hold_to_the_trace(out: Path) -> int:
    """The report's per-stage server TTFT (stages.csv, from the histogram's scrape-window deltas)
    against the simulator's own per-request trace for the same window: the same requests counted,
    each percentile within the width of the bucket it was interpolated in, the exact mean within
    the time the simulator takes to write a token after its engine made it. And client vs server
    on the same requests: never below the server by more than a bucket's width. Returns the number
    of stages checked (those whose window saw a first token)."""
    import pandas as pd

    from swarm.analysis.rundir import load_run
    from swarm.core.buckets import VLLM_TTFT_BUCKETS
    from swarm.stats.quantiles import bucket_width, percentile

    data = load_run(out)
    trace = pd.read_json(out / "sim-trace.jsonl", lines=True, convert_dates=False)
    trace = trace[trace["first_token_time"].notna()]
    report = _stages_csv(out)
    bounds = (*VLLM_TTFT_BUCKETS, float("inf"))
    assert data.server and set(data.ttft_pairs) == set(data.server), (data.server, data.ttft_pairs)
    checked = 0
    for stage, s in data.server.items():
        inside = trace[(trace["first_token_time"] > s.first_ts) & (trace["first_token_time"] <= s.last_ts)]
        truth = sorted((inside["first_token_time"] - inside["arrival_time"]).tolist())
        ttft = s.latency["ttft"]
        seen = f"stage {stage}: server {ttft}, trace n={len(truth)}"
        # the trace's time is the write after the engine's step: a request at a scrape edge may cross
        assert abs(ttft["count"] - len(truth)) <= max(3, 0.01 * len(truth)), seen
        if not truth or not ttft["count"]:
            continue
        checked += 1
        assert abs(ttft["mean"] - sum(truth) / len(truth)) <= 0.02 + 0.05 * ttft["mean"], seen
        for q, f in (("p50", 0.5), ("p99", 0.99)):
            shown = float(report[stage][f"srv_ttft_{q}_s"])
            exact = percentile(truth, f)
            assert abs(shown - exact) <= bucket_width(bounds, shown) + 0.01, (q, shown, exact, seen)
        pair = data.ttft_pairs[stage]
        assert pair.same_requests and pair.mean_gap is not None and pair.mean_gap >= -0.001, pair.to_json()
        for q in ("p50", "p99"):
            assert pair.gap(q) >= -(pair.width(q) or 0.0), (q, pair.to_json())
    return checked


def assert_causes_shown_by_gauges(out: Path, cap: int | None = None, *, outside: bool = False) -> list[str]:
    """Every bottleneck diagnosis.json names is one the server's own gauges show at that stage,
    and nothing outside the engine is named: the simulators here add no front-end or network delay.
    `outside`: a real server sharing two cores with its client (its API process, the client and
    the engine take turns on them), where time outside the engine is physically there and nothing
    else measures it; a cause outside the engine is then held to the server's own figures: the
    engine held under ENGINE_SHARE_MIN of the users at the ceiling or past it (`outside_engine`),
    the client's TTFT over the engine's by FRONTEND_GAP_MIN there (`frontend_bound`), by
    NETWORK_GAP_MIN at every stage (`network_delay`). Returns the kinds named."""
    from swarm.analysis.bottleneck import ENGINE_SHARE_MIN, KV_HIGH, KV_LOW, engine_share
    from swarm.analysis.rundir import load_run
    from swarm.analysis.ttft_gap import FRONTEND_GAP_MIN, NETWORK_GAP_MIN

    data = load_run(out)
    users = {r.stage: r.users for r in data.rows}
    order = [r.stage for r in sorted(data.rows, key=lambda r: (r.users or 0, r.stage))]
    found = json.loads((out / "diagnosis.json").read_text())
    for f in found:
        s = data.server.get(f["stage"]) if f["stage"] is not None else None
        if f["kind"] == "max_num_seqs_cap":
            assert s.running_max < users[f["stage"]] and s.waiting_mean > 0, (f, s)
            assert cap is None or s.running_max <= cap, (f, s)
        elif f["kind"] == "kv_bound":
            assert s.kv_max > KV_HIGH and s.kv_mean >= KV_LOW, (f, s)
        elif f["kind"] == "compute_bound":
            assert engine_share(s, users[f["stage"]]) >= ENGINE_SHARE_MIN, (f, s)
        elif f["kind"] in ("frontend_bound", "network_delay", "outside_engine") and not outside:
            raise AssertionError(f"a cause outside the engine named where none was: {f}")
        elif f["kind"] == "outside_engine":
            at = order[order.index(f["stage"]) : order.index(f["stage"]) + 2]  # the ceiling and past it
            shares = [engine_share(data.server[st], users[st]) for st in at if st in data.server]
            assert min(v for v in shares if v is not None) < ENGINE_SHARE_MIN, (f, shares)
        elif f["kind"] == "frontend_bound":
            assert data.ttft_pairs[f["stage"]].mean_gap >= FRONTEND_GAP_MIN, (f, data.ttft_pairs[f["stage"]])
        elif f["kind"] == "network_delay":
            gaps = [p.mean_gap for p in data.ttft_pairs.values() if p.mean_gap is not None]
            assert gaps and min(gaps) >= NETWORK_GAP_MIN, (f, gaps)
    return sorted({f["kind"] for f in found})
