"""`swarm demo`: its defaults are the search the README promises, and a second demo into the same
directory does not merge the first one's request records into its own."""

from __future__ import annotations

import argparse

from swarm.orchestrate import demo, run


def test_defaults_are_the_slo_search_on_the_calibrated_simulator():
    p = argparse.ArgumentParser()
    demo.configure(p)
    args = p.parse_args([])
    plan = run.plan_from_args(args)
    assert plan.host is None and plan.sim_profile == "rtx5090x4-qwen3.6-27b"
    assert plan.search == "concurrency" and plan.slo == "ttft_p99<=800ms" and plan.workload == "short_qa"
    assert plan.search_budget_s <= 210  # slower and right: settled stages, ~3 min with start-up
    assert "--search" in plan.search_args and "--slo" not in plan.search_args


def test_an_earlier_demos_record_parts_are_cleared(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for i in range(3):
        (records / f"worker-1-abc-{i:05d}.parquet").write_bytes(b"old")
    (tmp_path / "summary.json").write_text("{}")
    assert demo.clear_records(tmp_path) == 3
    assert not list(records.iterdir()) and (tmp_path / "summary.json").exists()
    assert demo.clear_records(tmp_path / "nothing-yet") == 0
