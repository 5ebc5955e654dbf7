"""swarm/load/cache_bust.py: `--prefix-cache bust` checked (bad input one UsageError line), a salt
where the server takes one, a unique leading tag elsewhere, and the request body that carries it."""

from __future__ import annotations

import orjson
import pytest

from swarm.client.dialects import DIALECTS
from swarm.core.errors import UsageError
from swarm.core.tokens import tokenize
from swarm.load.cache_bust import bust, busted_messages, busted_prompt, check_bust

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]


def test_check():
    assert check_bust("bust", "auto") is True
    assert check_bust("keep", "llamacpp") is False and check_bust(None, "vllm") is False
    assert check_bust("bust", "vllm", trace=True) is True  # a salt changes no prompt
    assert check_bust("bust", "auto", trace=True) is True  # known only at the first request


@pytest.mark.parametrize(("mode", "dialect", "trace", "says"), [
    ("smash", "vllm", False, "--prefix-cache must be one of keep, bust (got 'smash')"),
    ("bust", "llamacpp", True, "the llamacpp dialect takes no cache_salt"),
    ("bust", "openai", True, "the openai dialect takes no cache_salt"),
])  # fmt: skip
def test_bad_input_is_one_usage_line(mode, dialect, trace, says):
    with pytest.raises(UsageError) as e:
        check_bust(mode, dialect, trace=trace)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_salt_where_the_server_takes_one_and_the_text_untouched():
    assert bust(MESSAGES, None, "ab-1", takes_salt=True) == (MESSAGES, None, "ab-1")
    body = orjson.loads(
        DIALECTS["vllm"].body(
            endpoint="chat",
            model="m",
            messages=MESSAGES,
            prompt=None,
            max_tokens=8,
            thinking=None,
            cache_salt="ab-1",
        )
    )
    assert body["cache_salt"] == "ab-1" and body["messages"] == MESSAGES
    plain = orjson.loads(
        DIALECTS["vllm"].body(
            endpoint="chat", model="m", messages=MESSAGES, prompt=None, max_tokens=8, thinking=None
        )
    )
    assert "cache_salt" not in plain
    assert DIALECTS["vllm"].takes_salt and not DIALECTS["llamacpp"].takes_salt
    assert not DIALECTS["sglang"].takes_salt and not DIALECTS["openai"].takes_salt


def test_a_unique_leading_tag_elsewhere_of_a_few_tokens():
    msgs, prompt, salt = bust(MESSAGES, None, "ab-1", takes_salt=False)
    assert salt is None and prompt is None
    assert msgs[0]["content"] == "[bust ab-1]\n\nYou are terse." and msgs[1] == MESSAGES[1]
    assert MESSAGES[0]["content"] == "You are terse."  # the workload's own messages untouched
    other, _, _ = bust(MESSAGES, None, "ab-2", takes_salt=False)
    assert other[0]["content"] != msgs[0]["content"]  # unique from the first token on
    assert len(tokenize("[bust ab-1]\n\n")) <= 12  # a few tokens
    _, p, _ = bust(None, "Once upon", "ab-3", takes_salt=False)
    assert p == busted_prompt("Once upon", "ab-3") == "[bust ab-3]\n\nOnce upon"
    body = orjson.loads(
        DIALECTS["llamacpp"].body(
            endpoint="chat", model="m", messages=msgs, prompt=None, max_tokens=8, thinking=None
        )
    )
    assert body["messages"][0]["content"].startswith("[bust ab-1]") and "cache_salt" not in body


def test_content_parts_and_no_messages():
    parts = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert busted_messages(parts, "t")[0]["content"] == [
        {"type": "text", "text": "[bust t]\n\n"},
        {"type": "text", "text": "x"},
    ]
    assert busted_messages([], "t") == []
