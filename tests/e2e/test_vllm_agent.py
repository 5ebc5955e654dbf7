"""`agent` against the real vLLM CPU build with a named `--tool-choice`: vLLM's structured output
(guided decoding) makes even the tiny model answer valid arguments, so every tool call is parsed
valid, each task has its planned steps (the last one, tool_choice none, the answer), and the
swarm's token totals equal vLLM's counter deltas.

Uses the session's `vllm_target` (tests/e2e/conftest.py) and tests/e2e/test_vllm_real.py's
`SwarmRun` (counters scraped before and after). Written beside the simulator's reconciliation
(tests/integration/test_agent_sim.py); its one tool's argument is an enum, so the guided JSON
closes within a few tokens whatever the model's weights.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.test_vllm_real import SwarmRun
from tests.helpers.support import swarm_cmd

pytestmark = pytest.mark.serial

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "pick",
            "description": "Pick a colour",
            "parameters": {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
                "required": ["colour"],
            },
        },
    }
]
STEPS = 3


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_named_tool_call_is_valid_and_tasks_have_their_steps(vllm_target, vllm_report, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    out = tmp_path / "agent"
    before = vllm_target.settled()
    cmd = swarm_cmd("run", "--host", vllm_target.url, "--workers", "1", "-u", "2", "-t", "6s", "--out", str(out),
                    "--workload", "agent", "--", "--agent-steps", str(STEPS), "--tools", str(tools),
                    "--tool-choice", "pick", "--tool-result-tokens", "16", "--max-tokens", "24")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = SwarmRun(out, before, vllm_target.settled(), p.stdout)
    df = run.records
    ok = df[df.outcome == "ok"]
    assert len(ok) >= len(df) - 2 and len(ok) > STEPS  # at most one step a user cut by the stop
    calling = ok[ok.step < STEPS]
    assert (calling.tool_calls == 1).all() and (calling.tool_calls_valid == 1).all(), (
        calling.tool_error.value_counts()
    )
    assert (calling.finish_reason == "stop").all()  # a named choice finishes with stop (OpenAI's rule)
    assert calling.ttftc_s.notna().all()
    ended = ok[ok.task_s.notna()]
    assert len(ended) >= 1 and (ended.step == STEPS).all()
    for _, steps in ok.sort_values(["task_id", "step"]).groupby("task_id"):
        prompts = list(steps.prompt_tokens)
        assert prompts == sorted(prompts) and len(set(prompts)) == len(prompts), prompts  # each step's grows
    total = run.summary["total"]
    assert total["tools"]["invalid"] == 0 and total["tools"]["valid"] == int(df.tool_calls.sum())
    assert total["prompt_tokens"] == run.delta("prompt_tokens") and total["output_tokens"] == run.delta(
        "generation_tokens"
    )
    vllm_report.add(
        f"agent: {total['tools']['tasks']} tasks, {total['tools']['calls']} tool calls all valid; "
        f"task p50 {total['task_s']['p50']:.2f} s"
    )
