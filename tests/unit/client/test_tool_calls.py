"""swarm/client/tool_calls.py and `ToolTally`: streamed `delta.tool_calls` assembled by index and
judged (valid, or one short reason), the first tool-call chunk timed, tokens counted without a
running usage."""

from __future__ import annotations

import pytest

from swarm.client.dialects import DIALECTS
from swarm.client.tally import StreamTally, ToolTally
from swarm.client.tool_calls import ARGUMENT_CHARS_MAX, ToolCallAssembler, judge
from swarm.core.errors import BadChunk
from swarm.core.records import RequestRecord

REQUIRED = {"get_weather": ("city",), "search_web": ("query",)}


def first(index: int, name: str, args: str = "", cid: str = "call-x") -> dict:
    return {"id": cid, "type": "function", "index": index, "function": {"name": name, "arguments": args}}


def more(index: int, args: str) -> dict:
    return {"index": index, "function": {"arguments": args}}


def assembled(*chunks: list[dict]):
    a = ToolCallAssembler()
    for deltas in chunks:
        assert a.feed(deltas)
    return a.ordered()


def test_arguments_in_pieces_make_one_valid_call():
    calls = assembled(
        [first(0, "get_weather", "")], [more(0, '{"ci')], [more(0, 'ty": "Par')], [more(0, 'is"}')]
    )
    assert [(c.name, c.arguments, c.id) for c in calls] == [("get_weather", '{"city": "Paris"}', "call-x")]
    v = judge(calls, REQUIRED, "tool_calls")
    assert (v.calls, v.valid, v.reason) == (1, 1, None)
    assert calls[0].message() == {
        "id": "call-x",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }


def test_several_calls_in_one_answer_interleaved_by_index():
    calls = assembled(
        [first(0, "get_weather", '{"city":', "a"), first(1, "search_web", '{"query"', "b")],
        [more(1, ': "x"}')],
        [more(0, ' "Oslo"}')],
    )
    assert [(c.index, c.name, c.arguments) for c in calls] == [
        (0, "get_weather", '{"city": "Oslo"}'),
        (1, "search_web", '{"query": "x"}'),
    ]
    assert judge(calls, REQUIRED, "tool_calls").valid == 2


def test_each_reason():
    cases = [
        ([first(0, "get_weather", '{"city": "x"')], "stop", "bad_json"),
        ([first(0, "get_weather", '{"city": "x"')], "length", "unclosed"),  # cut by max_tokens
        ([first(0, "get_weather", '{"city": "x"')], None, "unclosed"),  # the stream ended without a finish
        ([first(0, "get_weather", '["x"]')], "stop", "not_object"),
        ([first(0, "nosuch", '{"city": "x"}')], "stop", "unknown_function"),
        ([first(0, "get_weather", '{"town": "x"}')], "stop", "missing_required"),
        ([more(0, '{"city": "x"}')], "stop", "no_name"),
    ]
    for deltas, finish, reason in cases:
        v = judge(assembled(deltas), REQUIRED, finish)
        assert (v.calls, v.valid, v.reason) == (1, 0, reason), (deltas, finish)


def test_arguments_that_never_close_stay_bounded():
    a = ToolCallAssembler()
    a.feed([first(0, "get_weather", '{"city": "')])
    piece = "x" * 65536
    for _ in range(ARGUMENT_CHARS_MAX // len(piece) + 4):
        a.feed([more(0, piece)])
    (call,) = a.ordered()
    assert call.chars <= ARGUMENT_CHARS_MAX + len(piece)
    assert judge([call], REQUIRED, "stop").reason == "unclosed"


def test_not_a_list_of_call_deltas_is_refused():
    a = ToolCallAssembler()
    assert not a.feed({"index": 0})
    assert not a.feed(["x"])
    assert not a.feed([{"index": "0"}])


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
    obj = {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return obj


def test_tool_tally_without_running_usage_counts_a_token_a_chunk_and_times_the_first_call():
    tally = ToolTally(DIALECTS["openai"])
    tally.feed(chunk({"role": "assistant", "content": ""}), 1.0)
    tally.feed(chunk({"tool_calls": [first(0, "get_weather", "")]}), 1.5)
    tally.feed(chunk({"tool_calls": [more(0, '{"city": "x"}')]}), 1.75)
    tally.feed(chunk({}, "tool_calls"), 2.0)
    rec = RequestRecord("agent", 0.0)
    tally.fill(rec, 1.0, 2.0)
    assert (rec.ttftc_s, rec.ttft_s, rec.output_tokens, rec.finish_reason) == (0.5, 0.5, 2, "tool_calls")
    assert judge(tally.assembler.ordered(), REQUIRED, tally.finish_reason).valid == 1


def test_tool_tally_with_running_usage_reads_tokens_from_it():
    tally = ToolTally(DIALECTS["vllm"])
    u = lambda n: {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}  # noqa: E731
    tally.feed(chunk({"role": "assistant", "content": ""}, usage=u(0)), 1.0)
    tally.feed(chunk({"tool_calls": [first(0, "get_weather", "{")]}, usage=u(1)), 1.25)
    tally.feed(chunk({"tool_calls": [more(0, '"city": 1}')]}, "tool_calls", usage=u(3)), 1.5)
    rec = RequestRecord("agent", 0.0)
    tally.fill(rec, 1.0, 1.5)
    assert (rec.output_tokens, rec.ttftc_s, rec.ttft_s) == (3, 0.25, 0.25)


def test_a_plain_tally_never_reads_tool_calls():
    assert not hasattr(StreamTally(DIALECTS["vllm"]), "assembler")


def test_a_malformed_tool_calls_delta_is_a_bad_chunk():
    tally = ToolTally(DIALECTS["openai"])
    with pytest.raises(BadChunk, match=r"malformed delta\.tool_calls"):
        tally.feed(chunk({"tool_calls": [{"index": "0"}]}), 1.0)
