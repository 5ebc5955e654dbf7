"""A target's text made safe for the terminal (swarm/core/terminal.py)."""

from __future__ import annotations

from swarm.core.terminal import SHOWN_MAX, printable, shown


def test_escapes_are_written_out():
    raw = "\x1b]0;pwned\x07\x1b[2Jred\rX\u202eevil\x9b\x7f\x00"
    out = printable(raw)
    assert out == "\\x1b]0;pwned\\x07\\x1b[2Jred\\x0dX\\u202eevil\\x9b\\x7f\\x00"
    assert out.isprintable()


def test_one_line_unless_lines_are_kept():
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"
    assert printable("a\nb\tc\x1b", lines=True) == "a\nb\tc\\x1b"


def test_plain_text_is_unchanged():
    text = "500 upstream error: 模型 überlastet (model overloaded) — retry"
    assert printable(text) == text


def test_shown_is_one_printable_line_cut_to_its_limit():
    assert shown("model\r\nswarm: forged") == "model\\x0d\\x0aswarm: forged"
    cut = shown("é" * 500)
    assert len(cut) == SHOWN_MAX and cut.endswith("…") and cut.startswith("é" * 199)
    assert shown("x" * SHOWN_MAX) == "x" * SHOWN_MAX  # at the limit: whole
