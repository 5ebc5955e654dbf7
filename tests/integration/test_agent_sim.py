"""`agent` through a real `swarm run` on the simulator: every step's record is one request of the
simulator's trace (its prompt and output tokens, its tool calls), every call valid, each task's
steps numbered in order with its prompt growing, a task's time the sum of its steps' E2E and tool
times within a millisecond, and summary.json's tool counts and task SLO those of the records."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.helpers.support import swarm_cmd

TASKS_MIN = 200


# serial: the instant simulator answers at once, so the users' closed loop takes a core (as
# test_prefix_cache_bust_sim's) and its neighbours' short runs would get no answer
@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.parametrize(
    "server, choice, finish",
    [("vllm", "run_sql", "stop"), ("llamacpp", "required", "tool_calls")],  # vLLM: stop under a named choice
)
def test_a_200_task_run_reconciles_with_the_simulator(tmp_path, server, choice, finish):
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "--workers", "1", "-u", "8", "-t", "3s", "--out", str(out), "--sim-profile", "instant",
                    f"--sim-arg=--server={server}", "--slo", "task_p90<=30s", "--workload", "agent", "--",
                    "--agent-steps", "1-4", "--tool-latency", "1ms-3ms", "--tool-result-tokens", "16-48",
                    "--tool-choice", choice)  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "SLO PASS: total.task_p90" in p.stdout and "agent: " in p.stdout
    records = pd.read_parquet(out / "requests.parquet")
    trace = pd.read_json(out / "sim-trace.jsonl", lines=True)
    df = records.merge(trace, left_on="request_id", right_on="id", suffixes=("", "_sim"), validate="1:1")
    assert len(df) == len(records) == len(trace)
    ok = df[df.outcome == "ok"]
    assert len(ok) >= len(df) - 8  # at most one step a user cut by the stop
    assert (ok.prompt_tokens == ok.prompt_tokens_sim).all()
    assert (ok.output_tokens == ok.completion_tokens).all()
    assert (ok.tool_calls == ok.tool_calls_sim).all()
    assert (ok.tool_calls_valid == ok.tool_calls).all() and ok.tool_error.isna().all()
    # required on every step but the last planned one (tool_choice none: the answer, no call)
    last = ok.step == ok.groupby("task_id").step.transform("max")
    assert (ok[~last].tool_calls >= 1).all() and (ok[~last].finish_reason == finish).all()
    if choice != "required":
        assert set(ok[~last].tool_calls) == {1}  # a named choice: that one function, once

    tasks = records.sort_values(["task_id", "step"]).groupby("task_id")
    ended = 0
    for tid, steps in tasks:
        assert list(steps.step) == list(range(1, len(steps) + 1)), tid
        assert steps.task_s.iloc[:-1].isna().all(), tid  # the task's time on its last step only
        if steps.task_s.iloc[-1] != steps.task_s.iloc[-1]:  # (NaN: the run stopped inside it)
            continue
        ended += 1
        total = steps.e2e_s.sum() + steps.tool_s.sum()
        assert abs(steps.task_s.iloc[-1] - total) < 1e-3, (tid, steps.task_s.iloc[-1], total)
        assert steps.tool_s.iloc[0] == 0 and (steps.tool_s.iloc[1:] >= 1e-3).all(), tid  # --tool-latency
        prompts = list(steps.prompt_tokens.dropna())
        assert prompts == sorted(prompts) and len(set(prompts)) == len(prompts), tid  # each step's grows
    assert ended >= TASKS_MIN, ended

    s = json.loads((out / "summary.json").read_text())
    tools = s["total"]["tools"]
    assert tools["steps"] == len(records)
    assert tools["tasks"] == int(records.task_s.notna().sum()) == ended
    assert tools["calls"] == int(records.tool_calls.sum()) == int(trace.tool_calls.sum())
    assert tools["valid"] == tools["calls"] and tools["invalid"] == 0 and tools["reasons"] == {}
    assert tools["task_goodput"]["met"] == tools["task_goodput"]["tasks"] == int((ok.task_s <= 30).sum())


# serial: as above (the users' closed loop on an instant simulator takes a core)
@pytest.mark.serial
@pytest.mark.integration
def test_a_server_that_never_calls_under_required_is_recorded_with_the_reason(tmp_path):
    """SGLang's face does not speak tools (it answers text): under `required` each task ends at
    its first step, recorded as `none_when_required`, and the run ends as asked."""
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "--workers", "1", "-u", "2", "-t", "2s", "--out", str(out), "--sim-profile", "instant",
                    "--sim-arg=--server=sglang", "--workload", "agent", "--", "--agent-steps", "3",
                    "--max-tokens", "8")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    records = pd.read_parquet(out / "requests.parquet")
    ok = records[records.outcome == "ok"]
    assert len(ok) > 10 and (ok.step == 1).all() and (ok.tool_calls == 0).all()
    assert (ok.tool_error == "none_when_required").all() and ok.task_s.notna().all()
    tools = json.loads((out / "summary.json").read_text())["total"]["tools"]
    assert tools["none_when_required"] == tools["reasons"]["none_when_required"] == len(ok)
    assert "steps without a call under required (none_when_required=" in p.stdout
