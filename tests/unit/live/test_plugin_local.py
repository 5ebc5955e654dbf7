"""swarm.live.plugin in-process with a LocalRunner and a fake worker report: no sub-processes."""

from __future__ import annotations

import argparse
import json

import msgpack
from locust.env import Environment
from locust.event import Events

from swarm.core import events as swarm_events
from swarm.core.runfiles import SUMMARY, SUMMARY_PART
from swarm.live.plugin import StatsPlugin
from swarm.stats.aggregate import Aggregate
from swarm.stats.wire import WIRE_KEY
from tests.helpers.synthetic import synthetic_records


def _env(tmp_path, **opts) -> Environment:
    options = argparse.Namespace(
        swarm_out=str(tmp_path / "out"), prometheus_port=None, slo=None, run_id="loc-1", model="m-1"
    )
    vars(options).update(opts)
    env = Environment(events=Events(), parsed_options=options)
    env.create_local_runner()
    return env


def test_local_records_summary_and_slo_exit_code(tmp_path):
    env = _env(tmp_path, slo="requests>=1,ttft_p99<=1ms")
    plugin = StatsPlugin(env, env.runner).master
    try:
        env.events.test_start.fire(environment=env)
        records = synthetic_records(200, workloads=("chat",), stages=(0,))
        for r in records:
            swarm_events.llm_request.fire(record=r)
        env.events.test_stop.fire(environment=env)
    finally:
        env.events.quitting.fire(environment=env)
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["total"]["requests"] == 200 and s["model_name"] == "m-1" and s["run_id"] == "loc-1"
    assert [v["ok"] for v in s["slo"]] == [True, False]
    assert env.process_exit_code == 1
    parts = list((tmp_path / "out" / "records").glob("*.parquet"))
    assert parts, "per-request records written with swarm.live.recorder"
    swarm_events.llm_request.fire(record=records[0])  # after quitting: no longer listening
    assert plugin.aggregate.combined().requests == 200


def test_under_swarm_run_the_master_writes_only_the_part_swarm_run_completes(tmp_path):
    """--summary-part (swarm run's): the summary goes to summary.part.json, never summary.json, which
    swarm run writes once, complete (swarm/orchestrate/collect.py)."""
    env = _env(tmp_path, summary_part=True)
    StatsPlugin(env, env.runner)
    env.events.test_start.fire(environment=env)
    for r in synthetic_records(20):
        swarm_events.llm_request.fire(record=r)
    env.events.test_stop.fire(environment=env)
    env.events.quitting.fire(environment=env)
    out = tmp_path / "out"
    assert json.loads((out / SUMMARY_PART).read_text())["total"]["requests"] == 20
    assert not (out / SUMMARY).exists()


def test_slo_pass_sets_exit_code_0(tmp_path):
    env = _env(tmp_path, slo="error_rate<=100%", swarm_out=None)
    StatsPlugin(env, env.runner)
    env.events.test_start.fire(environment=env)
    for r in synthetic_records(20):
        swarm_events.llm_request.fire(record=r)
    env.events.quitting.fire(environment=env)
    assert env.process_exit_code == 0


def test_master_side_merge_of_a_worker_report(tmp_path):
    """What the master does with `data["swarm"]`, fed the exact bytes a worker would send."""
    env = _env(tmp_path)
    plugin = StatsPlugin(env, env.runner).master
    try:
        worker_side = Aggregate()
        for r in synthetic_records(50):
            worker_side.add(r)
        data = msgpack.unpackb(
            msgpack.packb(
                {
                    WIRE_KEY: {
                        **worker_side.take_delta().to_wire(),
                        "stopped": True,
                        "model_name": "from-worker",
                    }
                }
            ),
            raw=False,
        )
        plugin.model_name = None
        plugin._on_worker_report(client_id="w-1", data=data)
        plugin._on_worker_report(client_id="w-1", data={WIRE_KEY: {"v": 999, "cells": []}})  # ignored, logged
        assert plugin.aggregate.combined().requests == 50
        assert plugin.model_name == "from-worker" and plugin.health.stopped["w-1"] is True
    finally:
        env.events.quitting.fire(environment=env)


def test_the_state_s_handles_reach_a_local_runner_s_two_sides(tmp_path):
    """`environment.swarm.stats` (swarm/live/state.py `StatsHandles`): `merged()` is the master
    side's aggregate with the local records pulled in (what the search reads), `count_cut()`
    counts a conversation cut on the worker side's turn table (what the user does)."""
    env = _env(tmp_path, swarm_out=None)
    plugin = StatsPlugin(env, env.runner)
    handles = plugin.handles()
    try:
        env.events.test_start.fire(environment=env)
        for r in synthetic_records(30):
            swarm_events.llm_request.fire(record=r)
        assert handles.merged is not None and handles.count_cut is not None
        assert handles.merged().combined().requests == 30  # pulled from the local worker side
        assert handles.merged() is plugin.master.aggregate
        handles.count_cut()
        assert plugin.worker.aggregate.turns.cut == 1
    finally:
        env.events.quitting.fire(environment=env)
