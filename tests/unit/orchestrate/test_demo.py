"""`swarm demo`: its defaults are the search the README promises, and a second demo replaces the
first one's directory (swarm/orchestrate/outdir.py) rather than merging its records."""

from __future__ import annotations

import argparse

from swarm.orchestrate import demo, run
from swarm.orchestrate.plan import plan_from_args


def test_defaults_are_the_slo_search_on_the_calibrated_simulator():
    p = argparse.ArgumentParser()
    demo.configure(p)
    args = p.parse_args([])
    plan = plan_from_args(args, run.run_options())
    assert plan.hosts == () and plan.sim_profile == "rtx5090x4-qwen3.6-27b"
    assert plan.search == "concurrency" and plan.slo == "ttft_p99<=800ms" and plan.workload == "short_qa"
    assert plan.search_budget_s <= 210  # slower and right: settled stages, ~3 min with start-up
    assert "--search" in plan.search_args and "--slo" not in plan.search_args


def test_each_demo_replaces_the_last_ones_directory():
    p = argparse.ArgumentParser()
    demo.configure(p)
    plan = plan_from_args(p.parse_args([]), run.run_options())
    assert plan.overwrite  # runs/demo: never refused, never mixed
