"""The diagnosis's rules over many cases on the simulator's virtual clock: each cause that lives in
the engine (nothing, a KV pool, a sequence cap, the cost of a token) injected at several strengths
and seeds, a three-stage sweep of each written as a run directory in well under a second
(swarm/orchestrate/virtual_run.py: the real-time simulator's engine and /metrics, no HTTP), then
judged as benchmarks/diagnosis_matrix.py judges a real sweep: the cause physically there (the
simulator's trace and scrapes) and the diagnosis naming it, trusted, and no other bottleneck kind.
The matrix itself (tests/integration/test_diagnosis_matrix.py) runs one case of each in the same
way and the causes on the way to the user in real time."""

from __future__ import annotations

import dataclasses
import re

import pytest

from benchmarks.diagnosis_matrix import BY_CAUSE, Scenario, diagnose, run_virtual

pytestmark = pytest.mark.integration

STAGE_S, WARMUP_S = 8, 2


def case(cause: str, sweep: tuple[int, ...], *sim_args: str) -> Scenario:
    base = BY_CAUSE[cause]
    return dataclasses.replace(base, sweep=sweep, sim_args=tuple(sim_args) or base.sim_args)


CASES = {
    **{f"none-seed{s}": (case("none", (2, 4, 8)), s) for s in (1, 2, 3)},
    "none-1-2-4": (case("none", (1, 2, 4)), 1),
    **{
        f"kv-{tokens}-seed{s}": (
            case("kv", (2, 8, 16), f"--kv-cache-tokens={tokens}", "--max-model-len=1024"),
            s,
        )
        for tokens in (1600, 2400)
        for s in (1, 2)
    },
    "kv-3200": (case("kv", (4, 16, 32), "--kv-cache-tokens=3200", "--max-model-len=1024"), 1),
    **{
        f"seq_cap-{cap}-seed{s}": (case("seq_cap", (2, 2 * cap, 4 * cap), f"--max-num-seqs={cap}"), s)
        for cap in (2, 4, 8)
        for s in (1, 2)
    },
    **{
        f"compute-x{scale}-seed{s}": (case("compute", (4, 16, 32), f"--token-cost-scale={scale}"), s)
        for scale in (10, 12, 14)
        for s in (1, 2)
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_engine_cause_is_there_and_named_alone(tmp_path, name):
    sc, seed = CASES[name]
    run_virtual(sc, tmp_path / "run", STAGE_S, WARMUP_S, seed=seed)
    o = diagnose(sc, tmp_path / "run", virtual=True)
    told = f"named {o.named}; physics {o.physics_problems}; {o.physics}"
    assert o.physical, told
    assert o.diagnosed, told
    texts = [f["text"] for f in o.findings if f["kind"] == sc.expected]
    if sc.cause == "seq_cap":  # the cap's value and the flag to raise
        cap = next(a for a in sc.sim_args if a.startswith("--max-num-seqs=")).split("=")[1]
        assert re.search(rf"pinned at {cap}\b", texts[0]) and "--max-num-seqs" in texts[0], texts
    if sc.cause == "kv":
        assert "KV-bound" in texts[0] and "kv_cache_usage_perc" in texts[0], texts
    # the records and the server's counters agree exactly on the virtual clock: nothing lost
    reconcile = [
        f["text"] for f in o.findings if f["kind"] == "client_vs_server" and "reconcile" in f["text"]
    ]
    assert len(reconcile) == 2, [f["text"] for f in o.findings]
