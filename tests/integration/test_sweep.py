"""Capacity sweeps end to end: `swarm run --sweep/--rate` against the simulator, then the
diagnosis the report gives (issue 5's done-when list)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from swarm.sim.calibrate import SEED_SHORT_QA
from tests.helpers.support import swarm_cmd
from tests.helpers.truth import assert_server_figures_hold_to_the_trace

pytestmark = pytest.mark.integration


def run(out: Path, *args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    p = subprocess.run(
        swarm_cmd("run", "--workers", "2", "--workload", "short_qa", "--out", str(out), *args),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def findings(out: Path) -> dict[str, list[dict]]:
    by_kind: dict[str, list[dict]] = {}
    for f in json.loads((out / "diagnosis.json").read_text()):
        by_kind.setdefault(f["kind"], []).append(f)
    return by_kind


def stages(out: Path) -> list[dict[str, str]]:
    with open(out / "stages.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.serial
@pytest.mark.slow
def test_calibrated_sweep_reproduces_the_seed_plateau(tmp_path):
    """Seed 000's short-QA table: QPS climbs to ~65 and stops between 200 and 256 users, KV near full.

    Also the calibrated profile held to the seed over HTTP in real time (moved here from
    tests/integration/test_sim_calibration.py, whose own closed loop measured the same six levels):
    each stage's QPS within 20% of the seed's, 256 no faster than 200 (the plateau), no request
    failed."""
    out = tmp_path / "sweep"
    p = run(out, "--sweep", "10,30,64,128,200,256", "--stage-time", "10s", "--warmup", "3s")
    assert "[stage 6/6" in p.stdout  # the live progress line
    rows = stages(out)
    assert [int(r["users"]) for r in rows] == [10, 30, 64, 128, 200, 256]
    qps = [float(r["qps"]) for r in rows]
    assert qps == sorted(qps[:5]) + qps[5:], qps  # rising until the ceiling
    told = ", ".join(
        f"{u}: {q:.1f} (seed {SEED_SHORT_QA[u]})" for u, q in zip(SEED_SHORT_QA, qps, strict=True)
    )
    assert all(int(r["failures"]) == 0 for r in rows), rows
    for users, q in zip(SEED_SHORT_QA, qps, strict=True):
        assert q == pytest.approx(SEED_SHORT_QA[users], rel=0.2), told
    assert 0.85 <= qps[5] / qps[4] <= 1.05, told  # the plateau: 256 is no faster than 200
    found = findings(out)
    sat = found.get("saturation")
    assert sat and sat[0]["stage"] == 4, (qps, found)  # flagged after 200 users: 256 adds < 5%
    assert float(rows[5]["srv_kv_max"]) >= 0.85, rows[5]
    assert "KV" in (out / "report.html").read_text()
    assert_server_figures_hold_to_the_trace(out)
    # the simulator adds no front-end or network delay: none is named, nor a cause outside the engine
    assert not {"frontend_bound", "network_delay", "outside_engine"} & set(found), found


@pytest.mark.serial
def test_open_loop_lateness_is_measured(tmp_path):
    """Below capacity requests leave on time; above it (in-flight cap reached) they leave late,
    and the summary says by how much instead of quietly offering less load."""
    out = tmp_path / "open"
    p = run(out, "--rate", "2,40", "--stage-time", "8s", "-u", "4", "--arrivals", "constant")
    assert "open loop 2,40 req/s" in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    low, high = summary["stages"]
    assert (low["rate"], high["rate"]) == (2.0, 40.0)
    assert low["total"]["send_lag_s"]["p50"] < 0.05, low["total"]["send_lag_s"]
    assert high["total"]["send_lag_s"]["p99"] > 1.0, high["total"]["send_lag_s"]
    assert high["total"]["qps"] < 20  # 4 in flight at ~0.7 s each cannot serve 40 req/s
    # the diagnosis names the late stage, untrusted, with what it sent against what it asked
    late = [f for f in findings(out).get("late_sends", [])]
    assert [f["stage"] for f in late] == [1] and not late[0]["trusted"], late
    sent = high["total"]["requests"] / high["duration_s"]
    assert high["sent_rate"] == sent and low["sent_rate"] == low["total"]["requests"] / low["duration_s"]
    assert f"open loop, stage 2: asked 40 req/s, sent {sent:.1f} req/s; send lag p50/p99/max" in p.stdout
    assert f"it sent {sent:.1f} req/s of the 40 asked for" in late[0]["text"], late
    assert "At 40 req/s requests left late" in late[0]["text"] and "raise -u (at most 4" in late[0]["text"]
    report = (out / "report.html").read_text()
    assert "rate asked req/s" in report and "send lag p99 ms" in report and "requests left late" in report
    # each late request's lag held to the simulator's trace: the server received the k-th request
    # of a worker's constant schedule (k / its 20 req/s after the worker's stage began) its lag
    # late, so arrival - lag - k / 20 is that worker's stage start for every request, however late
    lags, origins = _lag_against_the_trace(out, stage=1, workers=2, rate=40.0)
    assert max(lags) > 1.0 and min(lags) < 0.05, lags  # on time at first, seconds late at the end
    for worker, starts in origins.items():
        assert max(starts) - min(starts) < 0.05, (worker, starts)


def _lag_against_the_trace(out: Path, stage: int, workers: int, rate: float):
    """(every send lag of `stage`, {worker: each request's arrival - lag - k / its share of rate})."""
    from swarm.core.recordfile import read_table

    arrived = {}
    for line in (out / "sim-trace.jsonl").read_text().splitlines():
        t = json.loads(line)
        arrived[t["id"]] = t["arrival_time"]
    rows = read_table(out / "records").to_pylist()
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["stage"] == stage and r["send_lag_s"] is not None:
            worker = r["request_id"].rsplit("-", 2)[1]
            by_worker.setdefault(worker, []).append((arrived[r["request_id"]], r["send_lag_s"]))
    assert len(by_worker) == workers, by_worker.keys()
    gap = workers / rate
    origins = {
        w: [a - lag - k * gap for k, (a, lag) in enumerate(sorted(sent))] for w, sent in by_worker.items()
    }
    return [lag for sent in by_worker.values() for _, lag in sent], origins
