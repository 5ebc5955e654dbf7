"""A run directory as a twin's evidence: per stage what the server's scrapes and the client's records
show (swarm/tune/twin/fit.py fits the twin from it). Only what a real server exposes and the client
records is read: the running, waiting and KV gauges, the ITL histogram and the prompt / prefix
counters of /metrics, and each request's times and token counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swarm.analysis.client_server import TtftComparison
from swarm.analysis.finding import StageRow
from swarm.analysis.rundir import RunData
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.errors import UsageError
from swarm.tune.twin.fit import RunEvidence, StageEvidence

BLOCK_SIZE = 16  # vLLM's default KV block (what the client's tokens are rounded to)
KV_SAMPLES = 200  # instants per stage at which the client's held tokens are summed


def _timed(records: Any) -> Any:
    """The finished requests with their times and token counts (warm-up ones included)."""
    good = records[records["outcome"] == "ok"]
    return good[good["ttft_s"].notna() & good["e2e_s"].notna() & good["output_tokens"].notna()]


def _after_warmup(records: Any) -> Any:
    """The finished requests after their stage's warm-up (what a stage's statistics count)."""
    return records[~records["warmup"].fillna(False).astype(bool)]


def held_tokens(sub: Any, start: float, end: float, block: int = BLOCK_SIZE) -> tuple[float, float, float]:
    """(mean requests decoding, mean block-rounded tokens they hold, the batch a token is made in) over
    [start, end): each request from its first token to its end, holding its prompt plus the tokens
    generated so far. The batch is the decoding count weighted by itself (sum n^2 / sum n over the
    instants): what one stream's inter-token latency sees, idle instants left out."""
    if not len(sub) or end <= start:
        return 0.0, 0.0, 0.0
    first = (sub["start_wall_s"] + sub["ttft_s"]).to_numpy(float)
    last = (sub["start_wall_s"] + sub["e2e_s"]).to_numpy(float)
    prompt = sub["prompt_tokens"].fillna(0).to_numpy(float)
    out = sub["output_tokens"].to_numpy(float)
    t = np.linspace(start, end, KV_SAMPLES, endpoint=False)[:, None]
    live = (t >= first) & (t < last)
    span = np.maximum(last - first, 1e-9)
    made = 1.0 + (out - 1.0).clip(min=0) * ((t - first) / span).clip(0.0, 1.0)
    tokens = np.ceil((prompt + made) / block) * block
    n = live.sum(axis=1)
    batch = float((n * n).sum() / n.sum()) if n.sum() else 0.0
    return float(n.mean()), float((tokens * live).sum(axis=1).mean()), batch


MIN_WINDOW_REQUESTS = 5  # requests ended in the server's window before the two e2e means are compared


def _outside(timed: Any, pair: TtftComparison | None, server_e2e: float | None) -> float | None:
    """The client's e2e less the server's over the requests that ended in the server's window (its
    two scrapes): the time a request spends outside the engine (HTTP, the API server, the client)."""
    if pair is None or server_e2e is None:
        return None
    end = timed["start_wall_s"] + timed["e2e_s"]
    inside = timed[(end >= pair.start) & (end < pair.end)]
    if len(inside) < MIN_WINDOW_REQUESTS:
        return None
    return float(inside["e2e_s"].mean()) - server_e2e


def _qps_ci(row: StageRow) -> tuple[float, float] | None:
    """The stage's QPS 95% interval as the run computed it (summary.json), None where it had none."""
    entry = row.entry if isinstance(row.entry, dict) else {}
    ci = ((entry.get("total") or {}).get("ci") or {}).get("qps")
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2 else None


def _stage(
    row: StageRow, server: StageServerStats | None, timed: Any, pair: TtftComparison | None = None
) -> StageEvidence | None:
    if row.start_s is None or row.end_s is None:
        return None
    start, end = row.start_s + row.warmup_s, row.end_s
    decoding, held, batch = held_tokens(timed, start, end)
    sub = _after_warmup(timed[timed["stage"] == row.stage])
    s = server or StageServerStats(stage=row.stage)
    itl = (s.latency.get("itl") or {}).get("mean")
    itl_source = "server"
    if itl is None and len(sub):
        tpot = sub["tpot_s"].dropna()
        itl, itl_source = (float(tpot.mean()), "client") if len(tpot) else (None, "client")
    prefill = None
    if s.prompt_tok_s is not None and s.duration_s:
        prefill = s.prompt_tok_s - (s.prefix_hits or 0.0) / s.duration_s
    elif len(sub) and end > start:
        prefill = float(sub["prompt_tokens"].fillna(0).sum()) / (end - start)
    return StageEvidence(
        stage=row.stage,
        users=row.users,
        running_mean=s.running_mean if s.running_mean is not None else (decoding or None),
        running_max=s.running_max,
        running_pinned=s.running_pinned,
        waiting_mean=s.waiting_mean,
        kv_mean=s.kv_mean,
        itl_mean_s=itl,
        prefill_tok_s=prefill,
        kv_tokens_mean=held or None,
        prefix_hit_rate=s.prefix_hit_rate,
        itl_source=itl_source,
        batch_mean=batch or None,
        qps_ci=_qps_ci(row),
        completed=len(sub),
        outside_s=_outside(timed, pair, (s.latency.get("e2e") or {}).get("mean")),
        qps=row.qps
        if row.qps is not None
        else (len(sub) / (end - start) if end > start and len(sub) else None),
    )


def run_evidence(data: RunData) -> RunEvidence:
    """The evidence of a loaded run. UsageError when it has no request records."""
    if data.records is None or not len(data.records):
        raise UsageError(f"{data.directory}: no request records (requests.parquet): nothing to fit a twin to")
    timed = _timed(data.records)
    records = _after_warmup(timed)
    if not len(records):
        raise UsageError(f"{data.directory}: no request finished after warm-up: nothing to fit a twin to")
    stages = tuple(
        e
        for r in data.rows
        if (e := _stage(r, data.server.get(r.stage), timed, data.ttft_pairs.get(r.stage))) is not None
    )
    loaded = [r for r in data.rows if r.users is not None and (records["stage"] == r.stage).any()]
    low = min(loaded, key=lambda r: r.users or 0) if loaded else None
    ttft_low: tuple[tuple[int, float], ...] = ()
    prefill_low: tuple[float, float, float] | None = None
    if low is not None:
        sub = records[(records["stage"] == low.stage) & records["prompt_tokens"].notna()]
        ttft_low = tuple((int(p), float(t)) for p, t in zip(sub["prompt_tokens"], sub["ttft_s"], strict=True))
        server = data.server.get(low.stage)
        latency = server.latency if server is not None else {}
        phase, itl = (latency.get("prefill") or {}).get("mean"), (latency.get("itl") or {}).get("mean")
        if phase is not None and itl is not None and len(sub):
            prefill_low = (float(phase), float(itl), float(sub["prompt_tokens"].mean()))
    outputs = tuple(int(x) for x in records["output_tokens"])
    cut = float((records["finish_reason"] == "length").mean()) if "finish_reason" in records else 0.0
    longest = int((records["prompt_tokens"].fillna(0) + records["output_tokens"]).max())
    prompts = tuple(int(x) for x in records["prompt_tokens"].dropna())
    workloads = tuple(str(w) for w in data.summary.get("workloads") or ())
    return RunEvidence(
        stages=stages,
        ttft_low=ttft_low,
        outputs=outputs,
        cut_share=cut,
        longest_request=longest,
        block_size=BLOCK_SIZE,
        source=data.source,
        prompt_tokens=prompts,
        prefill_low=prefill_low,
        workloads=workloads,
    )
