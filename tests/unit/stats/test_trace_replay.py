"""swarm/stats/trace_replay.py: the end-of-run lines of a trace replay, from summary.json."""

from __future__ import annotations

from swarm.stats.trace_replay import replay_lines


def _summary(**replay) -> dict:
    base = {
        "rows": 100,
        "sent": 98,
        "unsent": 2,
        "duplicates": 0,
        "reassigned": 0,
        "reassigned_from": {},
        "reassigned_max_lag_s": 0.0,
        "behind": [],
        "max_lag_bound_s": 1.0,
    }
    base.update(replay)
    return {"trace_replay": base, "total": {"send_lag_s": {"p50": 0.004, "p99": 0.25}}}


def test_no_trace_replay_no_lines():
    assert replay_lines({"total": {}}) == []


def test_a_clean_replay_is_one_line_with_its_counts_and_send_lag():
    assert replay_lines(_summary()) == [
        "swarm: trace replay: 98 of 100 rows sent (2 unsent, 0 twice), send lag p50 4ms p99 250ms, "
        "0 re-assigned from lost workers"
    ]


def test_lost_workers_and_late_workers_are_named():
    lines = replay_lines(
        _summary(
            reassigned=7,
            reassigned_from={"w2": 7},
            reassigned_max_lag_s=1.2345,
            behind=[{"worker": "w1", "late": 3, "sent": 40, "max_lag_s": 2.5}],
        )
    )
    assert lines[0].endswith("7 re-assigned from lost workers (w2: 7; sent up to 1.234 s late)")
    assert (
        lines[1]
        == "swarm: trace replay fell behind: worker w1 sent 3 of 40 rows more than 1 s late (max 2.500 s)"
    )
