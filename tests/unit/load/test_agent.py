"""swarm/load/agent.py: the tools checked as JSON Schema, the tool choice, a task's messages
growing step by step, the last step asking for the answer, and the prompt tokens they make."""

from __future__ import annotations

import json
import random

import pytest

from swarm.core.errors import UsageError
from swarm.core.tokens import count_chat_tokens, count_tokens
from swarm.load.agent import BUILTIN_TOOLS, AgentWorkload, load_tools, result_text, toolset
from swarm.load.dists import parse_dist
from swarm.load.workloads import Knobs, build


def workload(steps: str = "3", choice: str = "required") -> AgentWorkload:
    return AgentWorkload(
        parse_dist(steps, "s"),
        load_tools("builtin"),
        choice,
        parse_dist("8", "r"),
        parse_dist("0", "l", real=True),
    )


def test_builtin_tools_and_what_each_requires():
    t = load_tools("builtin")
    assert t.tools is BUILTIN_TOOLS
    assert t.required == {
        "get_weather": ("city",),
        "search_web": ("query",),
        "read_file": ("path",),
        "run_sql": ("query", "limit"),
    }


@pytest.mark.parametrize(
    "tools, words",
    [
        ([], "non-empty JSON list"),
        ([{"type": "function"}], 'must be {"type": "function"'),
        ([{"type": "function", "function": {"name": "a b"}}], "function.name must be 1-64"),
        ([{"type": "function", "function": {"name": "f", "parameters": []}}], "must be a JSON Schema object"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
            "of type object",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"properties": {"x": {"type": "str"}}}},
                }
            ],
            "'str' is not a JSON Schema type",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"properties": {}, "required": ["x"]}},
                }
            ],
            "names ['x'], not among its properties",
        ),
        ([BUILTIN_TOOLS[0], BUILTIN_TOOLS[0]], "listed twice"),
    ],
)
def test_bad_tools_are_one_line(tools, words):
    with pytest.raises(UsageError) as e:
        toolset(tools, "f.json")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_tools_file(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(BUILTIN_TOOLS[:1]))
    assert list(load_tools(str(p)).required) == ["get_weather"]
    with pytest.raises(UsageError, match="cannot read"):
        load_tools(str(tmp_path / "nope.json"))


def test_tool_choice_auto_required_or_a_name_among_the_tools():
    assert workload(choice="auto").sent_choice == "auto"
    assert workload(choice="run_sql").sent_choice == {"type": "function", "function": {"name": "run_sql"}}
    with pytest.raises(UsageError, match="--tool-choice 'nosuch': not auto, required nor one of the tools"):
        workload(choice="nosuch")
    with pytest.raises(UsageError, match="bad --agent-steps"):
        build("agent", Knobs(agent_steps="0"))


def call(i: int) -> dict:
    return {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "x"}'},
    }


def test_a_task_grows_by_its_calls_and_results_and_ends_with_the_answer():
    w, rng = workload("3"), random.Random(1)
    task = w.start(rng, "t1")
    r1 = task.next_request()
    assert r1.tools is BUILTIN_TOOLS and r1.tool_choice == "required" and task.requires_call
    task.answered([call(1), call(2)], rng)
    r2 = task.next_request()
    assert [m["role"] for m in r2.messages] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in r2.messages[2:]] == ["c1", "c2"]
    assert all(count_tokens(m["content"]) == 8 for m in r2.messages[2:])  # --tool-result-tokens, exact
    grown = count_chat_tokens(r2.messages, r2.tools) - count_chat_tokens(r1.messages, r1.tools)
    assert grown > 2 * 8  # the calls and their results
    task.answered([call(3)], rng)
    r3 = task.next_request()
    assert r3.tool_choice == "none" and not task.requires_call  # the last planned step: the answer
    task.answered([], rng)
    assert task.ended and task.step == 3


def test_a_task_says_thinking_off_unless_the_ratio_draws_it_on():
    """Thinking off is sent, not left to the server: vLLM's qwen3 reasoning parser took the whole
    answer of a thinking-on step, its named call's arguments too, for reasoning (no tool call)."""
    rng = random.Random(3)
    off = build("agent", Knobs(agent_steps="3", tools="builtin", tool_choice="required"))
    assert all(off.start(rng, f"t{i}").next_request().thinking is False for i in range(20))
    on = build("agent", Knobs(agent_steps="3", tools="builtin", tool_choice="required", thinking_ratio=1.0))
    task = on.start(rng, "t")
    task.answered([call(1)], rng)
    assert task.next_request().thinking is True  # every step of the task


def test_a_step_without_a_call_ends_the_task_early():
    w, rng = workload("5", "auto"), random.Random(2)
    task = w.start(rng, "t")
    task.answered([], rng)
    assert task.ended and task.step == 1


def test_result_text_is_exactly_its_tokens():
    rng = random.Random(3)
    assert [count_tokens(result_text(n, rng)) for n in (1, 7, 300)] == [1, 7, 300]


def test_a_task_file_gives_each_task_its_first_messages(tmp_path):
    f = tmp_path / "tasks.jsonl"
    rows = [{"messages": [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": f"task {i}"}]} for i in range(2)]  # fmt: skip
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = build("agent", Knobs(dataset=f"jsonl:{f}", agent_steps="2"))
    rng = random.Random(0)
    firsts = [w.start(rng, f"t{i}").next_request().messages for i in range(4)]
    assert {m[-1]["content"] for m in firsts} == {"task 0", "task 1"}
    assert all(m[0]["role"] == "system" and len(m) == 2 for m in firsts)
