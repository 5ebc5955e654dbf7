"""A twin profile with known parameters, for the twin's unit tests."""

from __future__ import annotations

from pathlib import Path

from swarm.tune.twin.fit import EXTRAPOLATED, FITTED, REFUSED, Param, TwinFit
from swarm.tune.twin.profile import write_twin


def known_fit(cap: int | None = 8, kv: int | None = 4000, reached: float = 8.0) -> TwinFit:
    params = [
        Param("step.base_s", 0.01, FITTED, "ITL at 0 running", "R^2 1.000"),
        Param("step.decode_token_s", 0.001, FITTED, "ITL per running sequence", "R^2 1.000"),
        Param("step.prefill_token_s", 0.0, EXTRAPOLATED, "within its noise", "R^2 0.0"),
        Param(
            "engine.max_num_seqs",
            cap,
            FITTED if cap else REFUSED,
            "running pinned" if cap else "never reached",
            "-",
        ),
        Param(
            "engine.kv_cache_tokens",
            kv,
            FITTED if kv else REFUSED,
            "KV gauge" if kv else "no KV-usage gauge",
            "-",
        ),
        Param("engine.seq_state_tokens", 0 if kv else None, FITTED if kv else REFUSED, "KV gauge", "-"),
        Param("engine.prefix_caching", False, FITTED, "hit rate 0%", "-"),
        Param("lengths.output", 20.0, FITTED, "40 finished requests", "1 component"),
        Param("engine.max_model_len", 200, EXTRAPOLATED, "the longest request", "-"),
    ]
    return TwinFit({p.name: p for p in params}, [(1.0, 20, 20)], reached)


def write_known(path: Path, **kw) -> Path:
    write_twin(path, known_fit(**kw), "run-dir")
    return path
