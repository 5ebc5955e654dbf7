"""swarm/load/stages.py: the stage plan from --sweep/--rate/--stage-time/--warmup, and each stage's
window (summary.json's per-stage rates divide by it)."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.load.stages import Stage, StagePlan, StageState, Window, parse_rates, parse_sweep, stage_windows


def test_sweep_and_rate_lists_parse_and_refuse_what_no_schedule_can_run():
    assert parse_sweep("10, 30,64,") == [10, 30, 64]
    assert parse_rates("0.5,2") == [0.5, 2.0]
    for bad in ("", "0", "10,x", "-1"):
        with pytest.raises(UsageError, match="--sweep"):
            parse_sweep(bad)
    for bad in ("", "0", "nan", "inf", "5,abc"):
        with pytest.raises(UsageError, match="--rate"):
            parse_rates(bad)


def test_a_plan_is_closed_or_open_loop_with_a_warmup_shorter_than_its_stage():
    """--stage-time and --warmup come in as seconds (parsed once, by the caller)."""
    assert StagePlan.parse(None, None, 30.0, 0.0) == StagePlan()
    assert StagePlan.parse("8,16", None, 60.0, 10.0) == StagePlan((8, 16), (), 60.0, 10.0)
    assert StagePlan.parse(None, "2.5", 30.0, 5.0) == StagePlan((), (2.5,), 30.0, 5.0)
    with pytest.raises(UsageError, match="exclude each other"):
        StagePlan.parse("8", "2", 30.0, 0.0)
    with pytest.raises(UsageError, match=r"--warmup \(30s\) must be shorter than --stage-time \(30s\)"):
        StagePlan.parse("8", None, 30.0, 30.0)
    with pytest.raises(UsageError, match="--stage-time must be > 0"):
        StagePlan.parse("8", None, 0.0, 0.0)


def test_stage_windows_end_a_running_stage_at_the_run_end_and_default_to_one_stage():
    timeline = [Stage(0, 8, 100.0, 130.0), Stage(1, 16, 130.0)]
    assert stage_windows(timeline, 99.0, 150.0) == {0: Window(100.0, 130.0), 1: Window(130.0, 150.0)}
    assert stage_windows(timeline, 99.0, None) == {0: Window(100.0, 130.0)}  # end unknown: left out
    assert stage_windows([], 10.0, 40.0) == {0: Window(10.0, 40.0)}
    assert stage_windows([], None, 40.0) == {}
    state = StageState(timeline=timeline)
    assert state.windows(99.0, 150.0) == stage_windows(timeline, 99.0, 150.0)
