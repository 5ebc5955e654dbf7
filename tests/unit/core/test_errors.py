"""swarm/core/errors.py: exit codes and the one line a command prints for the exception that ends it."""

from __future__ import annotations

from swarm.core.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    BadChunk,
    LLMRequestFailure,
    TargetError,
    UsageError,
    exit_code,
    one_line,
)
from swarm.core.records import Outcome


def test_bad_input_exits_2_an_interrupt_130_anything_else_1():
    assert exit_code(UsageError("bad --rate")) == EXIT_USAGE == 2
    assert exit_code(KeyboardInterrupt()) == EXIT_INTERRUPTED == 130
    assert exit_code(TargetError("connection refused")) == EXIT_FAILED == 1
    assert exit_code(RuntimeError("bug")) == EXIT_FAILED


def test_the_line_says_error_for_bad_input_and_writes_out_control_characters():
    assert one_line("swarm", UsageError("bad --rate 'x'")) == "swarm: error: bad --rate 'x'"
    assert one_line("swarm", KeyboardInterrupt()) == "swarm: interrupted"
    # a message quoting a hostile target cannot move the terminal's cursor or change its colours
    line = one_line("swarm", TargetError("target said \x1b[2J\x1b[31mhi"))
    assert "\x1b" not in line and line == "swarm: target said \\x1b[2J\\x1b[31mhi"


def test_a_failed_request_carries_its_outcome_and_shows_it_first():
    e = LLMRequestFailure(Outcome.TIMEOUT, "no byte for 30 s")
    assert e.outcome is Outcome.TIMEOUT
    assert str(e) == repr(e) == f"{Outcome.TIMEOUT.value}: no byte for 30 s"
    assert BadChunk("not JSON").outcome is Outcome.BAD_CHUNK
