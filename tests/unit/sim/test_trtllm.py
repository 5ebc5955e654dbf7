"""swarm/sim/trtllm.py: trtllm-serve's request schema, held to `tensorrt_llm/serve/openai_protocol.py`
(NVIDIA/TensorRT-LLM at 0076e939): `OpenAIBaseModel` forbids undeclared fields, `model` is
required, `StreamOptions.include_usage` defaults to true."""

from __future__ import annotations

import json

import pytest

from swarm.sim import trtllm
from swarm.sim.protocol import parse_chat

MSGS = [{"role": "user", "content": "hi"}]


def test_a_field_the_request_model_does_not_declare_is_a_400_with_a_text_error():
    with pytest.raises(trtllm.SchemaError) as e:
        trtllm.check_fields({"model": "m", "messages": MSGS, "not_a_field": 1, "vllm_xargs": {}}, "chat")
    assert e.value.status == 400
    body = json.loads(e.value.body())
    assert (
        list(body) == ["error"]
        and "'not_a_field'" in body["error"]
        and "2 validation errors" in body["error"]
    )
    with pytest.raises(trtllm.SchemaError, match="'model'"):
        trtllm.check_fields({"messages": MSGS}, "chat")
    with pytest.raises(trtllm.SchemaError, match="'messages'"):  # a chat field on /v1/completions
        trtllm.check_fields({"model": "m", "prompt": "x", "messages": MSGS}, "completions")


def test_what_the_swarm_sends_is_declared():
    body = {
        "model": "m",
        "messages": MSGS,
        "max_tokens": 5,
        "stream": True,
        "stream_options": {},
        "ignore_eos": True,
    }
    trtllm.check_fields(
        {**body, "min_tokens": 1, "chat_template_kwargs": {}, "user": "u", "max_completion_tokens": 3}, "chat"
    )
    trtllm.check_fields(
        {"model": "m", "prompt": "x", "max_tokens": 5, "ignore_eos": True, "min_tokens": 1}, "completions"
    )


@pytest.mark.parametrize(
    ("opts", "stream", "include", "continuous"),
    [
        (None, True, True, False),
        ({"include_usage": False}, True, False, False),
        ({"continuous_usage_stats": True}, True, True, True),
        (None, False, False, False),
    ],
)
def test_usage_is_on_unless_the_request_turns_it_off(opts, stream, include, continuous):
    body = {"model": "m", "messages": MSGS, "stream": stream}
    if opts is not None:
        body["stream_options"] = opts
    req = parse_chat(body, 512)
    trtllm.usage_defaults(body, req)
    assert (req.include_usage, req.continuous_usage) == (include, continuous)
