"""`swarm demo` (what `make demo` runs): a distributed run against the embedded simulator.

Master + 2 worker processes, the `mixed` workload (80% direct answers, 20% thinking), the
simulator's `rtx5090x4-qwen3.6-27b` profile; prints the results table and writes the run
directory. Options are those of `swarm run`, with demo defaults.
"""

from __future__ import annotations

import argparse

from swarm.orchestrate import run

DEFAULTS = {
    "workload": "mixed",
    "workers": 2,
    "users": 48,
    "spawn_rate": 24.0,
    "run_time": "40s",
    "out": "runs/demo",
    "sim_profile": run.DEFAULT_SIM_PROFILE,
}


def configure(p: argparse.ArgumentParser) -> None:
    run.configure(p)
    p.set_defaults(**DEFAULTS)


def main(args: argparse.Namespace) -> int:
    return run.main(args)
