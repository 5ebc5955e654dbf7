"""Deterministic pseudo-tokenizer shared by the simulator and prompt-size targeting.

No real tokenizer ships with the swarm, yet the simulator must report prompt tokens that a
workload can aim at exactly. So both sides use this one rule, which roughly tracks byte-level
BPE on mixed Chinese/English text (Qwen-like: one token per CJK character, digits split):

- a run of ASCII letters is cut into pieces of at most 4 letters (`"hello"` -> `"hell"`, `"o"`);
- every digit is one token, and so is every other non-space character (CJK, punctuation, emoji);
- one space right before a non-space token belongs to that token (`" hello"` -> `" hell"`, `"o"`);
- any other whitespace run is one token (`"a  b"` -> `"a"`, `" "`, `" b"`; `"\\n\\n"` is one).

The split is lossless: `"".join(tokenize(t)) == t`.

Chat prompts add a template cost that mimics Qwen's ChatML: each message costs
`CHAT_TOKENS_PER_MESSAGE` (``<|im_start|>``, role, newline, ``<|im_end|>``, newline) plus its
content tokens, and the reply primer (``<|im_start|>assistant\\n``) costs
`CHAT_TOKENS_REPLY_PRIMER`. So `count_chat_tokens([{"role": "user", "content": "你好"}]) == 10`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CHAT_TOKENS_PER_MESSAGE",
    "CHAT_TOKENS_REPLY_PRIMER",
    "chat_prompt_tokens",
    "count_chat_tokens",
    "count_tokens",
    "message_text",
    "tokenize",
]

CHAT_TOKENS_PER_MESSAGE = 5
CHAT_TOKENS_REPLY_PRIMER = 3

_TOKEN_RE = re.compile(r" ?[A-Za-z]{1,4}| ?[0-9]| ?[^\sA-Za-z0-9]|\s+(?= \S)|\s+")


def tokenize(text: str) -> list[str]:
    """Split `text` into pseudo-tokens (see the module docstring for the rule)."""
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """Number of pseudo-tokens in `text`."""
    return len(_TOKEN_RE.findall(text))


def message_text(content: Any) -> str:
    """The text of an OpenAI message `content`: a string, or a list of parts whose text parts count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    raise TypeError("message content must be a string or a list of content parts")


def chat_prompt_tokens(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The pseudo-token list of a chat prompt, template markers included (for prefix hashing)."""
    out: list[str] = []
    for m in messages:
        out.append("<|im_start|>")
        out.append(str(m.get("role", "")))
        out.append("\n")
        out.extend(tokenize(message_text(m.get("content"))))
        out.append("<|im_end|>")
        out.append("\n")
    out += ["<|im_start|>", "assistant", "\n"]
    return out


def count_chat_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Prompt tokens of a chat request: per-message template cost + content tokens + reply primer."""
    n = CHAT_TOKENS_REPLY_PRIMER
    for m in messages:
        n += CHAT_TOKENS_PER_MESSAGE + count_tokens(message_text(m.get("content")))
    return n
