"""A synthetic `swarm run --sweep` run directory with the seed's short-QA numbers (summary.json,
requests.parquet, server_metrics.jsonl, client_cpu.jsonl): shared by the report and compare tests."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np

from swarm.analysis.server_metrics import Histogram, ServerSnapshot
from swarm.core import recordfile as recorder
from swarm.core.buckets import VLLM_E2E_BUCKETS, VLLM_TTFT_BUCKETS
from swarm.core.records import Outcome, RequestRecord
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.cpu import ClientLoad

SHORT_QA = [
    (10, 13.4, 0.168),
    (30, 28.1, 0.193),
    (64, 45.2, 0.292),
    (128, 60.2, 0.419),
    (200, 64.9, 0.727),
    (256, 64.7, 0.843),
]


T0 = 1_800_000_000.0


def make_run(
    directory: Path,
    table=SHORT_QA,
    stage_s: float = 10.0,
    users_in_summary: bool = True,
    server: bool = True,
    cpu: bool = True,
    records: bool = True,
    kv_scale: float = 1.0,
    slo: str | None = "ttft_p99<=800ms",
    cap: int = 241,
) -> Path:
    """A run directory as `swarm run --sweep` leaves it, with the seed's numbers per stage."""
    directory.mkdir(parents=True, exist_ok=True)
    recs: list[RequestRecord] = []
    for stage, (users, qps, p99) in enumerate(table):
        n = round(qps * stage_s)
        start = T0 + stage * stage_s
        for i in range(n):
            ttft = p99 * (0.5 + 0.5 * (i / max(n - 1, 1)) ** 6)
            outcome = Outcome.TIMEOUT if stage == len(table) - 1 and i % 50 == 7 else Outcome.OK
            recs.append(
                RequestRecord(
                    workload="short_qa",
                    start_wall_s=start + i * stage_s / n,
                    outcome=outcome,
                    stage=stage,
                    ttft_s=ttft,
                    e2e_s=ttft + 49 * 0.018 * (1 + users / 256),
                    tpot_s=0.018 * (1 + users / 256),
                    itl_s=[0.018] * 3,
                    prompt_tokens=40,
                    output_tokens=50,
                    tokens_from_usage=True,
                    finish_reason="length",
                )
            )
    agg = Aggregate()
    for r in recs:
        agg.add(r)
    windows = {s: (T0 + s * stage_s, T0 + (s + 1) * stage_s) for s in range(len(table))}
    s = summary.build(
        agg,
        run_id="sweep-test",
        model_name="qwen3.6-27b",
        start_s=T0,
        end_s=T0 + len(table) * stage_s,
        users=table[-1][0],
        workers=2,
        stage_windows=windows,
    )
    if users_in_summary:
        for entry in s["stages"]:
            entry["users"] = table[entry["stage"]][0]
            entry["start_s"], entry["end_s"] = windows[entry["stage"]]
    if slo:
        s["slo"] = [{"text": "...", "ok": False, "objective": slo}]
    summary.write(s, directory / "summary.json")
    if records:
        recorder.write_records(recs, directory / "requests.parquet")
    if server:
        write_server_metrics(directory / "server_metrics.jsonl", recs, table, stage_s, kv_scale, cap)
    if cpu:  # as the master writes it: each worker's CPU and wall seconds per stage
        with open(directory / "client_cpu.jsonl", "w") as out:
            for stage in range(len(table)):
                for w in ("worker-0", "worker-1"):
                    busy = 96.0 if w == "worker-1" and stage == len(table) - 1 else 45.0
                    entries = [[stage, busy * stage_s / 100, stage_s]]
                    for line in ClientLoad.lines(w, entries, T0 + (stage + 1) * stage_s):
                        out.write(json.dumps(line) + "\n")
    return directory


def write_server_metrics(path: Path, recs, table, stage_s, kv_scale, cap) -> None:
    """1 s scrapes: running capped at `cap` (seed round 2: 241), KV 96% + preemptions from 200 users on."""
    ok = [r for r in recs if r.outcome is Outcome.OK]
    done = np.array([r.start_wall_s + r.e2e_s for r in ok])
    ttft = np.array([r.ttft_s - 0.012 for r in ok])  # the engine sees 12 ms less than the client
    # vLLM observes TTFT at the first token (the engine's: 12 ms before the client reads it)
    first = np.array([r.start_wall_s + r.ttft_s - 0.012 for r in ok])
    e2e = np.array([r.e2e_s - 0.012 for r in ok])
    bt, be = (*VLLM_TTFT_BUCKETS, float("inf")), (*VLLM_E2E_BUCKETS, float("inf"))
    preempt = 0.0
    with open(path, "w") as out:
        for t in range(int(len(table) * stage_s) + 1):
            ts = T0 + t
            stage = min(int(t // stage_s), len(table) - 1)
            users = table[stage][0]
            fin = done <= ts
            if t and table[min(int((t - 1) // stage_s), len(table) - 1)][0] >= 200:
                preempt += 3
            snap = ServerSnapshot(
                ts=ts,
                source="vllm",
                model="qwen3.6-27b",
                running=min(users, cap) - (t % 2 if users < cap else 0),
                waiting=max(0, users - cap),
                kv_usage=min(0.96, users / 200 * 0.96) * kv_scale,
                prompt_tokens=40.0 * fin.sum(),
                generation_tokens=50.0 * fin.sum(),
                preemptions=preempt,
                prefix_queries=40.0 * fin.sum(),
                prefix_hits=10.0 * fin.sum(),
                request_success={"length": float(fin.sum())},
                spec_drafts=10.0 * t,
                spec_draft_tokens=30.0 * t,
                spec_accepted=21.0 * t,
            )
            made = first <= ts
            snap.histograms["ttft"] = Histogram(
                bt,
                tuple(float((ttft[made] <= b).sum()) for b in bt),
                float(ttft[made].sum()),
                float(made.sum()),
            )
            snap.histograms["e2e"] = Histogram(
                be, tuple(float((e2e[fin] <= b).sum()) for b in be), float(e2e[fin].sum()), float(fin.sum())
            )
            out.write(json.dumps(snap.to_json()) + "\n")


def images(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)]


def add_sim_trace(directory: Path, queue_share: float = 0.3) -> int:
    """Name every record of a run (request_id r0, r1, ...) and write the simulator's trace of them
    (sim-trace.jsonl): arrival at the send, first scheduled `queue_share` of the way to the first
    token, first token and end as the client saw them. Returns the number of requests traced."""
    import pandas as pd

    df = pd.read_parquet(directory / "requests.parquet")
    df["request_id"] = [f"r{i}" for i in range(len(df))]
    df.to_parquet(directory / "requests.parquet")
    with open(directory / "sim-trace.jsonl", "w") as out:
        for r in df.itertuples(index=False):
            first = r.start_wall_s + r.ttft_s
            line = {
                "id": r.request_id,
                "arrival_time": r.start_wall_s,
                "first_token_time": first,
                "end_time": r.start_wall_s + r.e2e_s,
                "scheduled_time": r.start_wall_s + queue_share * r.ttft_s,
            }
            out.write(json.dumps(line) + "\n")
    return len(df)
