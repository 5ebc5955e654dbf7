"""Synthetic request records shaped like a real run, and the exact values a latency statistic is
computed from; the exporter's /metrics text of such records, merged from three workers: shared by the
aggregate, summary, exporter and plugin tests."""

from __future__ import annotations

import math
import random

import msgpack

from swarm.core.records import OUTCOMES, Outcome, RequestRecord
from swarm.live.exporter import ExportState, render
from swarm.stats import quantiles as metrics
from swarm.stats.aggregate import Aggregate


def synthetic_records(
    n: int, seed: int = 7, workloads=("short_qa", "chat", "rag"), stages=(0, 1)
) -> list[RequestRecord]:
    """Records shaped like a real run: lognormal latencies, some failures, warm-up, long ITL lists."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        outcome = Outcome.OK if rng.random() < 0.9 else rng.choice([o for o in OUTCOMES if o.failed])
        ttft = rng.lognormvariate(math.log(0.2), 0.6)
        tokens = rng.randint(1, 300)
        itl = [rng.lognormvariate(math.log(0.018), 0.3) for _ in range(max(0, tokens - 1))]
        if itl and rng.random() < 0.2:
            itl[0] = 0.0  # two chunks in one read
        e2e = ttft + sum(itl)
        out.append(
            RequestRecord(
                workload=rng.choice(workloads),
                start_wall_s=1_700_000_000.0 + i * 0.01,
                outcome=outcome,
                stage=rng.choice(stages),
                ttft_s=ttft,
                ttfa_s=ttft * (1 + rng.random()),
                e2e_s=e2e,
                tpot_s=metrics.tpot_s(ttft, e2e, tokens),
                itl_s=itl,
                prompt_tokens=rng.randint(10, 3000),
                output_tokens=tokens,
                reasoning_tokens=rng.randint(0, tokens),
                warmup=rng.random() < 0.05,
                send_lag_s=rng.expovariate(100.0) if i % 2 else None,  # open-loop lateness on half of them
            )
        )
    return out


def exact_values(records, latency: str) -> list[float]:
    vals: list[float] = []
    for r in records:
        if r.warmup:
            continue
        if latency == "send_lag":  # every request sent has a lateness, failed ones too
            if r.send_lag_s is not None:
                vals.append(r.send_lag_s)
            continue
        if r.outcome is not Outcome.OK:
            continue
        if latency == "itl":
            vals.extend(r.itl_s)
        elif (v := getattr(r, f"{latency}_s")) is not None:
            vals.append(v)
    return vals


SECRET = "sk-very-secret-0123"


def master_from_workers(records, n_workers=3) -> Aggregate:
    master = Aggregate()
    workers = [Aggregate() for _ in range(n_workers)]
    for i, r in enumerate(records):
        workers[i % n_workers].add(r)
    for w in workers:
        master.merge(Aggregate.from_wire(msgpack.unpackb(msgpack.packb(w.take_delta().to_wire()), raw=False)))
    return master


MODELS = ("Qwen/Qwen3-27B", "support-lora")


def exporter_records() -> list[RequestRecord]:
    """1500 records of two workloads split over two models (MODELS, 2:1); every failure's message
    carries SECRET (it must never be exported)."""
    rs = synthetic_records(1500, seed=21, workloads=("short_qa", "chat"))
    for i, r in enumerate(rs):
        r.model = MODELS[1] if i % 3 == 2 else MODELS[0]
        if r.outcome.failed:
            r.error = f"401 Unauthorized: bad key {SECRET}"
    return rs


def exporter_text(records: list[RequestRecord]) -> str:
    """The master's /metrics text once three workers have sent `records` over the wire."""
    state = ExportState(
        master_from_workers(records),
        run_id="run-1",
        model_name="Qwen/Qwen3-27B",
        users=64,
        workers=3,
        stage=1,
        degraded_workers=1,
    )
    return render(state).decode()
