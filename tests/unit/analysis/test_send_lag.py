"""`late_sends`: an open-loop stage whose requests left late is named, untrusted, with what it sent
against what it asked and the change that fits (the in-flight cap, or the event loop)."""

from __future__ import annotations

import pytest

from swarm.analysis.diagnosis import diagnose
from swarm.analysis.finding import StageRow
from swarm.analysis.send_lag import LIMIT_ENV, SEND_LAG_MAX_S, late_sends, send_lag_limit
from swarm.core.errors import UsageError


def stage(i: int, rate: float | None, sent: int, lag_p99: float | None, *, users: int = 4) -> StageRow:
    return StageRow(
        stage=i,
        users=users,
        duration_s=10.0,
        requests=sent,
        qps=sent / 10.0,
        ttft_p99=0.05 * (i + 1),
        rate=rate,
        send_lag_p50=None if lag_p99 is None else lag_p99 / 2,
        send_lag_p99=lag_p99,
        send_lag_max=None if lag_p99 is None else lag_p99 * 1.2,
    )


def test_only_the_stage_over_the_bar_is_named_and_untrusted():
    rows = [stage(0, 2.0, 20, 0.002), stage(1, 40.0, 156, 3.69)]
    (f,) = late_sends(rows, 0.05)
    assert f.kind == "late_sends" and f.stage == 1 and not f.trusted
    assert f.text.startswith("At 40 req/s requests left late: send lag p99 3690 ms, max 4428 ms")
    assert "it sent 15.6 req/s of the 40 asked for" in f.text
    assert "raise -u (at most 4 requests were in flight)" in f.text  # 15.6 of 40: the cap held them


def test_a_stage_that_sent_its_rate_late_is_the_event_loop_not_the_cap():
    (f,) = late_sends([stage(0, 100.0, 1000, 0.12, users=5000)], 0.05)
    assert "it sent 100.0 req/s of the 100 asked for" in f.text
    assert "add --workers (the event loop was late, not the in-flight cap)" in f.text


def test_a_small_stage_is_held_by_its_median_not_its_worst_request():
    """16 requests at 2 req/s, the first one 170 ms late as the users started: the p99 is that one."""
    small = stage(0, 2.0, 16, 0.17)
    small.send_lag_p50 = 0.004
    assert late_sends([small], 0.05) == []
    small.send_lag_p50 = 0.09  # most of them late: named, by its median
    (f,) = late_sends([small], 0.05)
    assert "send lag p50 90 ms, max 204 ms (on time is p50 within 50 ms)" in f.text, f.text
    big = stage(1, 2.0, 100, 0.17)
    big.send_lag_p50 = 0.004  # 100 requests: the p99 is an order statistic, not the worst one
    assert [f.stage for f in late_sends([big], 0.05)] == [1]


def test_closed_loop_and_unmeasured_stages_are_never_named():

    assert (
        late_sends([stage(0, None, 100, None), stage(1, None, 100, 9.0), stage(2, 10.0, 100, None)], 0.05)
        == []
    )
    assert late_sends([stage(0, 10.0, 100, 0.05)], 0.05) == []  # at the bar is on time


def test_the_bar_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert send_lag_limit() == SEND_LAG_MAX_S
    monkeypatch.setenv(LIMIT_ENV, "10ms")
    assert send_lag_limit() == pytest.approx(0.01)
    assert late_sends([stage(0, 10.0, 100, 0.02)])  # over 10 ms
    monkeypatch.setenv(LIMIT_ENV, "soon")
    with pytest.raises(UsageError, match=LIMIT_ENV):
        send_lag_limit()


def test_the_diagnosis_says_it_and_the_ceiling_there_is_doubted(monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    rows = [stage(0, 10.0, 100, 0.001), stage(1, 20.0, 200, 0.002), stage(2, 40.0, 205, 1.5)]
    found = diagnose(rows, {})
    late = [f for f in found if f.kind == "late_sends"]
    assert [f.stage for f in late] == [2]
    (sat,) = [f for f in found if f.kind == "saturation"]
    assert sat.stage == 1 and not sat.trusted and "sending late" in sat.text
    assert "from 20 req/s" not in sat.text and "Ceiling at 20 req/s: going to 40 req/s" in sat.text
