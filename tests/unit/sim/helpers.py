"""Shared by the simulator's engine tests: a small valid profile and a loop that runs an engine dry
on its virtual clock."""

from __future__ import annotations

from swarm.sim.engine import Engine
from swarm.sim.profile import Profile, StepCost


def small_profile(**kw) -> Profile:
    """A profile small enough to reason about: 8 sequences, 64-token steps, 1024 KV tokens."""
    base = dict(
        name="t",
        max_num_seqs=8,
        max_num_batched_tokens=64,
        kv_cache_tokens=1024,
        max_model_len=512,
        block_size=16,
        step=StepCost(base_s=0.01, decode_token_s=0.001),
    )
    base.update(kw)
    p = Profile(**base)
    p.validate()
    return p


def drain(engine: Engine, t: float = 0.0, max_steps: int = 100000) -> float:
    for _ in range(max_steps):
        plan = engine.schedule(t)
        if plan is None:
            return t
        t += engine.step_seconds(plan)
        engine.complete(plan, t)
    raise AssertionError("engine did not drain")
