"""parse_duration: the spans that may be under a second (--trace-max-lag, the trace window)."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.core.units import parse_duration, parse_timespan, stage_name, stage_number


@pytest.mark.parametrize(
    "text, seconds",
    [("250ms", 0.25), ("0.5s", 0.5), ("2", 2.0), ("1.5", 1.5), ("1m30s", 90.0), ("1h", 3600.0),
     ("1s500ms", 1.5), (" 3s ", 3.0), ("0ms", 0.0), ("500us", 0.0005), ("2ms250us", 0.00225)],
)  # fmt: skip
def test_parse_duration_reads_fractions_and_milliseconds(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["20", "20s", "3m", "1h20m", "3h30m10s"])
def test_parse_duration_agrees_with_locusts_format_where_both_apply(text):
    assert parse_duration(text) == parse_timespan(text)


@pytest.mark.parametrize("text", ["", "soon", "-1s", "1.s", "ms", "5 ms", "1x", "1s-"])
def test_parse_duration_refuses_with_the_option_named(text):
    with pytest.raises(UsageError, match=r"^--trace-max-lag: bad time .*: use e\.g\. 250ms, 1\.5s, 2m$"):
        parse_duration(text, "--trace-max-lag")


@pytest.mark.parametrize(
    "text, seconds", [("1.5m", 90), ("2000ms", 2), ("1m30s", 90), ("0.5m", 30), ("7", 7)]
)
def test_parse_timespan_reads_the_one_duration_syntax(text, seconds):
    """Whole-second spans (-t, --stage-time, --search-budget) take what every duration takes."""
    assert parse_timespan(text) == seconds


def test_parse_timespan_refuses_a_fraction_of_a_second_where_seconds_count():
    with pytest.raises(UsageError, match=r"^--stage-time: '1500ms' is not a whole number of seconds"):
        parse_timespan("1500ms", "--stage-time")


def test_stages_are_named_from_one():
    """The one numbering of every label: index 0 (records, summary.json `stage`) is "stage 1"."""
    assert [stage_number(i) for i in (0, 1, 9)] == [1, 2, 10]
    assert stage_name(0) == "stage 1" and stage_name(5) == "stage 6"
