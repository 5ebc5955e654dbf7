"""swarm.core.tokens: the token rule the simulator and the workloads count with."""

from __future__ import annotations

import random

import pytest

from swarm.core.tokens import chat_prompt_tokens, count_chat_tokens, count_tokens, tokenize


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        (" hello world", [" hell", "o", " worl", "d"]),
        ("你好,世界!", ["你", "好", ",", "世", "界", "!"]),
        ("1024 是 2", ["1", "0", "2", "4", " 是", " 2"]),
        ("a  b", ["a", " ", " b"]),
        ("x\n\ny", ["x", "\n\n", "y"]),
        ("", []),
    ],
)
def test_tokenize_rule(text, tokens):
    assert tokenize(text) == tokens
    assert count_tokens(text) == len(tokens)


def test_tokenize_is_lossless_on_random_text():
    rng = random.Random(3)
    alphabet = "ab Z9 中文,。\n\t😀xyzw"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert "".join(tokenize(text)) == text


def test_chat_prompt_token_rule():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "你好"}]
    # 3 (reply primer) + per message 5 + content ("Be", " bri", "ef", "." = 4; "你", "好" = 2)
    assert count_chat_tokens(msgs) == 3 + 5 + 4 + 5 + 2 == len(chat_prompt_tokens(msgs))
    parts = [{"role": "user", "content": [{"type": "text", "text": "你好"}, {"type": "image_url"}]}]
    assert count_chat_tokens(parts) == 10
