"""swarm/orchestrate/virtual_run.py: the run directory the engine writes on its virtual clock, held to
its own trace and its own /metrics (the diagnosis over many such runs: tests/integration/
test_diagnosis_virtual.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from swarm.analysis.server_metrics import read_snapshots
from swarm.core.errors import UsageError
from swarm.orchestrate.virtual_run import START_WALL_S, VirtualSweep, sim_profile, synthetic, write_sweep

SWEEP = VirtualSweep(users=(1, 3), stage_s=2.0, warmup_s=0.5, request=synthetic((16, 64), (4, 12)), seed=3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("virtual") / "run"
    n = write_sweep(out, sim_profile("rtx5090x4-qwen3.6-27b", ["--max-num-seqs=2"]), SWEEP)
    return out, n


def test_every_request_is_one_record_one_trace_line_and_counted_by_the_server(run):
    out, n = run
    df = pd.read_parquet(out / "requests.parquet")
    trace = [json.loads(x) for x in (out / "sim-trace.jsonl").read_text().splitlines()]
    last = read_snapshots(out / "server_metrics.jsonl")[-1]
    assert n == len(df) == len(trace) == sum(last.request_success.values()) > 20
    assert sorted(df.request_id) == sorted(t["id"] for t in trace)
    assert int(df.output_tokens.sum()) == last.generation_tokens
    assert int(df.prompt_tokens.sum()) == last.prompt_tokens
    assert df.prompt_tokens.between(16, 64).all() and df.output_tokens.between(4, 12).all()
    assert (df.outcome == "ok").all() and (df.finish_reason == "length").all()


def test_each_record_is_the_engines_own_timing(run):
    out, _ = run
    df = pd.read_parquet(out / "requests.parquet").set_index("request_id")
    trace = {t["id"]: t for t in map(json.loads, (out / "sim-trace.jsonl").read_text().splitlines())}
    for rid, r in df.iterrows():
        t = trace[rid]
        assert r.start_wall_s == t["arrival_time"]
        # wall times near 1.8e9 s are floats good to 2.4e-7 s
        assert r.ttft_s == pytest.approx(t["first_token_time"] - t["arrival_time"], abs=1e-6)
        assert r.e2e_s == pytest.approx(t["end_time"] - t["arrival_time"], abs=1e-6)
        assert len(r.itl_s) == r.output_tokens - 1
        assert sum(r.itl_s) == pytest.approx(r.e2e_s - r.ttft_s, abs=1e-9)


def test_stages_warm_ups_and_users_are_the_sweeps(run):
    out, _ = run
    df = pd.read_parquet(out / "requests.parquet")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["clock"] == "virtual"
    assert [
        (s["users"], s["start_s"] - START_WALL_S, s["end_s"] - START_WALL_S) for s in summary["stages"]
    ] == [
        (1, 0.0, 2.0),
        (3, 2.0, 4.0),
    ]
    since = df.start_wall_s - START_WALL_S - df.stage * SWEEP.stage_s
    assert ((since >= 0) & (since < SWEEP.stage_s)).all()  # each sent within its stage
    assert (df.warmup == (since < SWEEP.warmup_s)).all()
    ends = df.start_wall_s + df.e2e_s
    for stage, users in enumerate(SWEEP.users):  # in flight at each send: never more than the users
        sent = df[df.stage == stage].start_wall_s
        in_flight = [int(((df.start_wall_s <= t) & (ends > t)).sum()) for t in sent]
        assert max(in_flight) == users
    assert (
        df.start_wall_s - START_WALL_S < len(SWEEP.users) * SWEEP.stage_s
    ).all()  # none sent after the end


def test_a_directory_holding_a_run_and_a_bad_sweep_are_refused(run, tmp_path):
    out, _ = run
    with pytest.raises(FileExistsError):
        write_sweep(out, sim_profile("instant"), SWEEP)
    with pytest.raises(ValueError, match="never fall"):
        VirtualSweep((4, 2), 2.0, 0.5, synthetic((8, 8), (4, 4)))
    with pytest.raises(ValueError, match="shorter than the stage"):
        VirtualSweep((4,), 2.0, 2.0, synthetic((8, 8), (4, 4)))
    with pytest.raises(UsageError):
        sim_profile("instant", ["--max-num-seqs=0"])
