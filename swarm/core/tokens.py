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

Tools grow the prompt as Qwen2.5's template renders them (its `tokenizer_config.json` chat
template): the request's `tools` become a block at the head of the prompt (`<tools>`, one JSON
line per tool, `</tools>`: 4 tokens plus the tools' JSON, the same on every step of a
task, so it is a shared prefix), an assistant message's `tool_calls` each add `<tool_call>`,
newline, `{"name": ..., "arguments": ...}`, newline, `</tool_call>` (4 tokens plus
the JSON's), and a `tool` message costs what any message does.
"""

from __future__ import annotations

import json
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
    "tool_call_pieces",
    "tools_pieces",
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


def _json_text(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def tools_pieces(tools: Any) -> list[str]:
    """The pseudo-tokens of a request's `tools` block ([] for none)."""
    if not isinstance(tools, list) or not tools:
        return []
    out = ["<tools>", "\n"]
    for t in tools:
        out.extend(tokenize(_json_text(t) + "\n"))
    return [*out, "</tools>", "\n"]


def tool_call_pieces(calls: Any) -> list[str]:
    """The pseudo-tokens an assistant message's `tool_calls` add after its content."""
    out: list[str] = []
    if not isinstance(calls, list):
        return out
    for c in calls:
        fn = c.get("function") if isinstance(c, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        text = (
            '{"name": ' + _json_text(fn.get("name")) + ', "arguments": ' + str(fn.get("arguments", "")) + "}"
        )
        out += ["<tool_call>", "\n", *tokenize(text), "\n", "</tool_call>"]
    return out


def chat_prompt_tokens(messages: Iterable[Mapping[str, Any]], tools: Any = None) -> list[str]:
    """The pseudo-token list of a chat prompt, template markers included (for prefix hashing)."""
    out: list[str] = tools_pieces(tools)
    for m in messages:
        out.append("<|im_start|>")
        out.append(str(m.get("role", "")))
        out.append("\n")
        out.extend(tokenize(message_text(m.get("content"))))
        if "tool_calls" in m:
            out.extend(tool_call_pieces(m["tool_calls"]))
        out.append("<|im_end|>")
        out.append("\n")
    out += ["<|im_start|>", "assistant", "\n"]
    return out


def count_chat_tokens(messages: Iterable[Mapping[str, Any]], tools: Any = None) -> int:
    """Prompt tokens of a chat request: per-message template cost + content tokens + reply primer
    (+ the tools block and the assistant messages' tool calls, when there are any)."""
    n = CHAT_TOKENS_REPLY_PRIMER + (len(tools_pieces(tools)) if tools else 0)
    for m in messages:
        n += CHAT_TOKENS_PER_MESSAGE + count_tokens(message_text(m.get("content")))
        if "tool_calls" in m:
            n += len(tool_call_pieces(m["tool_calls"]))
    return n
