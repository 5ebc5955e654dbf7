"""`swarm compare` on the simulator's virtual clock (swarm/orchestrate/virtual_run.py: the calibrated
profile's engine, no HTTP, seconds): two repeats of one plan (other seeds) mark no more stage
metrics significant than 95% allows, and --max-num-seqs 64 vs 256 marks the QPS and TTFT changes."""

from __future__ import annotations

import pytest

from swarm.analysis.compare import compare_rows
from swarm.analysis.rundir import load_run
from swarm.orchestrate.virtual_run import VirtualSweep, sim_profile, synthetic, write_sweep

pytestmark = pytest.mark.integration

PROFILE = "rtx5090x4-qwen3.6-27b"  # the calibrated one
STAGE_S, WARMUP_S = 40.0, 2.0


def _run(out, users, seed, *flags):
    sweep = VirtualSweep(users, STAGE_S, WARMUP_S, synthetic((100, 300), (20, 60)), seed)
    write_sweep(out, sim_profile(PROFILE, flags), sweep)
    return load_run(out)


def test_two_repeats_mark_no_more_than_chance(tmp_path):
    users = (16, 32, 64, 128)
    a, b = _run(tmp_path / "a", users, 1), _run(tmp_path / "b", users, 2)
    _, rows = compare_rows([a, b])
    judged = [r.changes[1] for r in rows if r.changes[1] is not None and r.changes[1].significant is not None]
    marked = [(r.key, r.metric) for r in rows if r.changes[1] is not None and r.changes[1].significant]
    assert len(judged) >= 12  # QPS, TTFT p50, TPOT p50 at each of 4 stages (p99s: too few requests)
    assert len(marked) <= 1, marked  # at 95%: about 0.6 expected by chance over these


def test_max_num_seqs_64_vs_256_marks_qps_and_ttft(tmp_path):
    users = (32, 128, 256)
    a = _run(tmp_path / "64", users, 1, "--max-num-seqs=64")
    b = _run(tmp_path / "256", users, 1, "--max-num-seqs=256")
    _, rows = compare_rows([a, b])
    at = {(r.key, r.metric): r.changes[1] for r in rows}
    for load in (128, 256):  # past 64 users the cap binds
        qps, ttft = at[(load, "qps")], at[(load, "ttft_p50")]
        assert qps.significant and qps.rel_low > 0, qps
        assert ttft.significant and ttft.rel_high < 0, ttft
