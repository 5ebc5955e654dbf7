"""`swarm demo` (what `make demo` runs): the search on the calibrated simulator.

Master + 2 worker processes against the embedded simulator's `rtx5090x4-qwen3.6-27b` profile
(seed 000's 4x RTX 5090 server), seed 000's short-QA workload, searching for the most concurrent
users that still meet seed 000's latency target (TTFT p99 within 800 ms: the seed measured 727 ms
at 200 users and 843 ms at 256). It prints each probe's verdict live, the answer with its
bracket, why the server stops there (from its own /metrics: KV cache, scheduler cap or compute)
and writes the report with every probed point to runs/demo/. Each stage is measured once it has
settled, and only a measured verdict moves the bracket (swarm/stats/search_bracket.py), which costs
time: the budget keeps the search within three and a half minutes (it ended in ~160 s here).
Options are those of `swarm run`, with these defaults; `swarm demo --help` lists only these (every
other `swarm run` option is accepted too, as `swarm run --help` describes it).
"""

from __future__ import annotations

import argparse

from swarm.orchestrate import run

DEFAULTS = {
    "workload": "short_qa",
    "workers": 2,
    "users": 128,  # the search's first load (seed 000 measured 128 users; doubling reaches 256)
    "search": "concurrency",
    "slo": "ttft_p99<=800ms",
    "search_precision": "5%",
    "search_budget": "210s",  # ~8 stages of 6-15 s settling and 9-15 s measuring (~160 s here)
    "stage_time": "15s",  # a stage's longest; most end sooner, once the verdict is certain
    "min_stage_time": "4s",
    "stop_timeout": "5s",
    "out": "runs/demo",
    "overwrite": True,  # each demo replaces the last one's runs/demo
    "sim_profile": run.DEFAULT_SIM_PROFILE,
}


def configure(p: argparse.ArgumentParser) -> None:
    run.configure(p)
    p.set_defaults(**DEFAULTS)
    for action in p._actions:  # argparse has no public way to walk them
        if action.dest in DEFAULTS:
            action.help = f"{action.help} [demo: {str(DEFAULTS[action.dest]).replace('%', '%%')}]"
        elif action.dest != "help":
            action.help = argparse.SUPPRESS
    p.epilog = (
        "Also every other swarm run option (see swarm run --help): the demo only changes the defaults above."
    )


def main(args: argparse.Namespace) -> int:
    return run.main(args)
