"""swarm/sim/tool_calls.py: what vLLM's face answers to `tools`: calls by tool choice, arguments
valid against the schema at the profile's size, one piece a token, chunks the client assembles."""

from __future__ import annotations

import random

import orjson
import pytest

from swarm.client.tool_calls import ToolCallAssembler, judge
from swarm.core.errors import UsageError
from swarm.load.agent import BUILTIN_TOOLS, load_tools
from swarm.sim.llamacpp import LlamaError, parse_request
from swarm.sim.profile import parse_profile
from swarm.sim.protocol import ApiError, parse_chat
from swarm.sim.tool_calls import plan, read_choice, read_tools, token_chunks

SPECS = read_tools(BUILTIN_TOOLS)
MSG = [{"role": "user", "content": "hi"}]


def test_each_choice():
    rng = random.Random(0)
    assert plan(rng, SPECS, "none", 1.0, 20, 1) is None
    assert plan(rng, SPECS, "auto", 0.0, 20, 1) is None
    assert all(plan(rng, SPECS, "required", 0.0, 20, 1) is not None for _ in range(20))
    named = plan(rng, SPECS, "run_sql", 0.0, 20, 1)
    assert named.named and [c.name for c in named.calls] == ["run_sql"]
    calls = [plan(rng, SPECS, "auto", 0.5, 20, 1) for _ in range(400)]
    assert 150 < sum(c is not None for c in calls) < 250  # the call rate


@pytest.mark.parametrize("size", [1, 6, 24, 300])
def test_arguments_are_valid_at_the_profiles_size_and_the_client_assembles_them(size):
    rng = random.Random(size)
    p = plan(rng, SPECS, "required", 1.0, size, 3)
    assert len(p.calls) == 3
    required = load_tools("builtin").required
    for c in p.calls:
        args = orjson.loads("".join(c.pieces))
        assert set(required[c.name]) <= set(args)
        assert len(c.pieces) >= size
    a = ToolCallAssembler()
    for d in token_chunks(p):
        a.feed(orjson.loads(d)["tool_calls"])
    got = a.ordered()
    assert [g.name for g in got] == [c.name for c in p.calls]
    assert judge(got, required, "tool_calls").valid == 3
    assert len(token_chunks(p)) == p.tokens == sum(len(c.pieces) for c in p.calls)
    assert p.calls_started(0) == 0 and p.calls_started(1) == 1 and p.calls_started(p.tokens) == 3


def test_vllm_refuses_a_choice_it_cannot_follow():
    with pytest.raises(ApiError, match="Tool 'x' has not been passed in `tools`"):
        parse_chat(
            {
                "messages": MSG,
                "tools": BUILTIN_TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "x"}},
            },
            4096,
        )
    with pytest.raises(ApiError, match="`tools` must be set"):
        parse_chat({"messages": MSG, "tool_choice": "required"}, 4096)
    with pytest.raises(ApiError, match="tools\\[0\\] must be"):
        parse_chat({"messages": MSG, "tools": [{"type": "function"}]}, 4096)
    assert read_choice(None, SPECS) == "auto" and read_choice(None, None) == "none"


def test_the_tools_and_the_calls_grow_the_prompt():
    plain = parse_chat({"messages": MSG}, 4096)
    tools = parse_chat({"messages": MSG, "tools": BUILTIN_TOOLS}, 4096)
    assert tools.prompt_tokens > plain.prompt_tokens and tools.tool_choice == "auto"
    assert (
        tools.prompt_pieces[-plain.prompt_tokens :] == plain.prompt_pieces
    )  # the tools lead: a shared prefix
    call = {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "x"}'}}
    after = parse_chat(
        {
            "messages": [
                *MSG,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"},
            ],
            "tools": BUILTIN_TOOLS,
        },
        4096,
    )
    assert (
        after.prompt_pieces[: tools.prompt_tokens - 3] == tools.prompt_pieces[:-3]
    )  # the earlier prompt is a prefix


def test_the_profiles_tools_table():
    p = parse_profile({"tools": {"call_rate": 0.5, "arguments": {"value": 40}, "calls": {"value": 2}}}, "t")
    rng = random.Random(0)
    assert (p.tool_call_rate, p.tool_arguments.sample(rng), p.tool_calls.sample(rng)) == (0.5, 40, 2)
    with pytest.raises(UsageError, match=r"unknown key\(s\) in \[tools\]: \['rate'\]"):
        parse_profile({"tools": {"rate": 1}}, "t")
    with pytest.raises(UsageError, match=r"\[tools\] call_rate must be in \[0, 1\]"):
        parse_profile({"tools": {"call_rate": 2}}, "t")


def test_llama_server_reads_its_tool_choice_and_streams_in_its_key_order():
    req = parse_request(
        {"messages": MSG, "tools": BUILTIN_TOOLS, "tool_choice": {"type": "function"}}, "chat", 4096
    )
    assert req.tool_choice == "auto"  # an object is not a string: its default
    assert (
        parse_request({"messages": MSG, "tool_choice": "required"}, "chat", 4096).tool_choice == "none"
    )  # no tools
    with pytest.raises(LlamaError, match="Invalid tool_choice: any"):
        parse_request({"messages": MSG, "tools": BUILTIN_TOOLS, "tool_choice": "any"}, "chat", 4096)
    p = plan(random.Random(0), SPECS, "required", 1.0, 8, 1, "")
    first, *rest = (orjson.loads(d)["tool_calls"][0] for d in token_chunks(p, llamacpp=True))
    assert list(first) == ["index", "id", "type", "function"] and len(first["id"]) == 32
    assert all(list(d) == ["index", "function"] for d in rest)
