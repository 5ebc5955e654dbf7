"""swarm/sim/protocol.py: which served model a request names, vLLM's 404 for an unknown one, and
the checks chat and completions share (in the order vLLM reports them)."""

from __future__ import annotations

import pytest

from swarm.sim.protocol import ApiError, check_model, parse_chat, parse_completion

CHAT = [{"role": "user", "content": "hello there"}]


def test_a_request_gets_its_model_or_the_first_and_an_unknown_one_is_a_404():
    assert check_model({}, ("base", "a")) == "base" and check_model({"model": "a"}, ("base", "a")) == "a"
    with pytest.raises(ApiError) as e:
        check_model({"model": "x"}, ("base", "a"))
    assert e.value.status == 404 and "Valid aliases: base, a." in e.value.body().decode()


def test_a_chat_request_read_as_vllm_reads_it():
    body = {
        "messages": CHAT,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "max_completion_tokens": 40,
        "min_tokens": 50,
        "ignore_eos": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    with pytest.raises(ApiError, match="min_tokens must be less than or equal to max_tokens=40"):
        parse_chat(body, 512)
    r = parse_chat(body | {"min_tokens": 10}, 512)
    assert (r.stream, r.include_usage, r.continuous_usage, r.ignore_eos, r.thinking) == (True,) * 4 + (False,)
    assert (r.max_tokens, r.min_tokens, r.endpoint) == (40, 10, "chat") and r.prompt_tokens == len(
        r.prompt_pieces
    )
    plain = parse_chat({"messages": CHAT, "stream_options": None}, 512)
    assert not plain.include_usage and plain.thinking is None
    assert plain.max_tokens == 512 - plain.prompt_tokens  # no max_tokens: what the context leaves
    # running usage only with the final usage chunk
    assert not parse_chat(
        {"messages": CHAT, "stream": True, "stream_options": {"continuous_usage_stats": True}}, 512
    ).continuous_usage


def test_the_context_cuts_max_tokens_and_refuses_what_cannot_fit():
    r = parse_completion({"prompt": list(range(10)), "max_tokens": 60, "min_tokens": 58}, 64)
    assert r.prompt_tokens == 10 and r.max_tokens == 54 and r.min_tokens == 54  # what the context leaves
    with pytest.raises(ApiError, match="cannot be greater than max_model_len=64"):
        parse_completion({"prompt": "x", "max_tokens": 65}, 64)
    with pytest.raises(ApiError, match="at least 5 input tokens") as e:
        parse_completion({"prompt": list(range(9))}, 4)  # vLLM counts up to max_model_len + 1
    assert e.value.param == "input_tokens"
    assert parse_completion({"prompt": "x", "chat_template_kwargs": 3}, 64).thinking is None  # chat only


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # each body breaks two rules: the one vLLM reports first is the answer
        ({"stream_options": [], "n": 2}, "valid dictionary or instance of StreamOptions"),
        ({"stream_options": {}, "n": 2}, "only be defined when `stream=True`"),
        ({"n": 2, "temperature": -1}, "n must be 1"),
        ({"temperature": "hot", "max_tokens": 0}, "unable to parse string as a number"),
        ({"temperature": True}, "Input should be a valid number"),
        ({"temperature": -1, "max_tokens": 0}, "temperature must be non-negative"),
        ({"max_tokens": 0, "min_tokens": -1}, "max_tokens must be at least 1"),
        ({"min_tokens": -1, "ignore_eos": "x"}, "min_tokens must be greater than or equal to 0"),
        ({"ignore_eos": "x", "max_tokens": 10**6}, "ignore_eos"),
        ({"max_tokens": 10**6, "chat_template_kwargs": 3}, "cannot be greater than max_model_len"),
        ({"chat_template_kwargs": 3}, "valid dictionary"),
        ({"chat_template_kwargs": {"enable_thinking": "yes"}}, "enable_thinking"),
    ],
)
def test_the_first_broken_rule_is_the_one_answered(extra, message):
    with pytest.raises(ApiError) as e:
        parse_chat({"messages": CHAT} | extra, 512)
    assert message in e.value.message or message in str(e.value.param) or message in e.value.body().decode()
