"""Text a target sent, made safe for the operator's terminal and logs.

A target's words (an error body, a /metrics line, an HTTP reason, a model name) may carry terminal
escape sequences (`ESC ]0;title BEL`, `ESC [2J`, OSC 8 links), a carriage return that overwrites
the line before it, or Unicode bidi controls that reorder what is shown. `printable` writes every
such character out as a visible escape (`\\x1b`, `\\u202e`): nothing a target says is interpreted
by the terminal, and the operator still sees that it was there.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the bidi marks, embeddings, overrides and isolates
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ALL = re.compile(f"[\x00-\x1f{_OTHERS}]")
_ALL_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # tab and line feed kept


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with its control characters written as `\\xNN` / `\\uNNNN`. `lines=True` keeps line
    feeds and tabs (a log tail); otherwise the result is one line."""
    return (_ALL_BUT_LINES if lines else _ALL).sub(_visible, text)


SHOWN_MAX = 200
"""The most characters of one target-given string (a model id, an error body) a line shows."""


def shown(text: str, limit: int = SHOWN_MAX) -> str:
    """`text` as one printable line of at most `limit` characters, its cut end written `…`: what a
    target named (a model id from /v1/models, an error body) as a log, terminal or report line
    shows it, so no target forges a line or floods one."""
    line = printable(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"
