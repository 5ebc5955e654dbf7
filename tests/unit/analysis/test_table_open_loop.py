"""`open_loop_lines`: each open-loop stage's rate asked against the rate sent, with its send lag."""

from __future__ import annotations

from swarm.analysis.table import open_loop_lines, render


def _summary(stages):
    return {"total": {"requests": 0, "failures": {}}, "workloads": {}, "stages": stages}


def test_each_open_loop_stage_says_what_it_asked_and_what_it_sent():
    lag = {"p50": 0.0007, "p99": 0.2938, "max": 0.3079}
    s = _summary(
        [
            {"stage": 0, "rate": 5.0, "sent_rate": 4.78, "total": {"send_lag_s": lag}},
            {"stage": 1, "rate": 40.0, "sent_rate": 5.6, "total": {"send_lag_s": {"p50": 1.795}}},
        ]
    )
    assert open_loop_lines(s) == [
        "open loop, stage 1: asked 5 req/s, sent 4.8 req/s; send lag p50/p99/max 0.7/293.8/307.9 ms",
        "open loop, stage 2: asked 40 req/s, sent 5.6 req/s; send lag p50/p99/max 1795.0/-/- ms",
    ]
    assert "open loop, stage 2: asked 40 req/s" in render(s)


def test_closed_loop_stages_and_older_files_say_nothing():
    assert open_loop_lines(_summary([{"stage": 0, "users": 4, "total": {}}])) == []
    assert open_loop_lines(_summary([{"stage": 0, "rate": 5.0, "total": {}}])) == []  # no sent_rate: older
    assert open_loop_lines({}) == []


def test_the_intervals_table_names_an_open_loop_stage_by_its_rate():
    from swarm.analysis.table import ci_table

    s = _summary([{"stage": 0, "rate": 40.0, "users": 4, "total": {}}, {"stage": 1, "users": 8, "total": {}}])
    _head, rows, _notes = ci_table(s)
    assert [r[0] for r in rows][:2] == ["stage 1 (40 req/s)", "stage 2 (8 users)"]
