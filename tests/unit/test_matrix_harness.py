"""benchmarks/diagnosis_matrix.py's judgements without running a sweep: what counts as a cause
diagnosed, physically present, and a thread starved (the harness end to end:
tests/integration/test_diagnosis_matrix.py)."""

from __future__ import annotations

import pytest

from benchmarks.diagnosis_matrix import (
    BY_CAUSE,
    Outcome,
    StagePhysics,
    matrix_text,
    physics_check,
    queue_average,
    runnable_share,
)
from swarm.analysis.server_metrics import StageServerStats

CALM = "worker CPU < 70%, worker and simulator runnable < 75% of the time"


@pytest.mark.parametrize(
    ("expected", "named", "ok"),
    [
        ("kv_bound", {"kv_bound": True}, True),
        ("kv_bound", {"kv_bound": True, "compute_bound": True}, False),  # another cause named too
        ("kv_bound", {"kv_bound": False}, False),  # named but not trusted
        ("kv_bound", {}, False),
        ("client_bound", {"client_bound": False}, True),  # the untrusted-measurement finding
        ("client_bound", {"client_bound": True}, False),
        (None, {}, True),  # nothing injected, nothing named
        (None, {"compute_bound": True}, False),
    ],
)
def test_a_cause_is_diagnosed_when_named_trusted_and_alone(expected, named, ok):
    assert Outcome("x", expected, named).diagnosed is ok


def test_an_error_is_neither_diagnosed_nor_physical():
    o = Outcome("kv", "kv_bound", {"kv_bound": True}, error="swarm run exited 2")
    assert not o.diagnosed and not o.physical


def test_runnable_share_is_cpu_plus_run_queue_wait_over_wall_of_the_busiest_process():
    lines = [
        {"ts": 10.0, "role": "worker", "pid": 1, "cpu_s": 5.0, "wait_s": 1.0},
        {"ts": 12.0, "role": "worker", "pid": 1, "cpu_s": 5.5, "wait_s": 2.4},  # 0.5 + 1.4 of 2 s
        {"ts": 10.0, "role": "worker", "pid": 2, "cpu_s": 0.0, "wait_s": 0.0},
        {"ts": 12.0, "role": "worker", "pid": 2, "cpu_s": 0.2, "wait_s": 0.0},
        {"ts": 11.0, "role": "sim", "pid": 3, "cpu_s": 0.0, "wait_s": 0.0},
    ]
    assert runnable_share(lines, "worker", 9.0, 13.0) == pytest.approx(0.95)
    assert runnable_share(lines, "sim", 9.0, 13.0) is None  # one sample: no interval
    assert runnable_share(lines, "worker", 11.0, 13.0) is None  # one sample each in the window


def _stage(users: int, **kw) -> StagePhysics:
    base = dict(
        users=users,
        qps=10.0,
        running_max=float(users),
        waiting_mean=0.0,
        kv_max=0.01,
        preemptions=0.0,
        engine_ttft_p50_s=0.01,
        write_wait_p50_s=0.0,
        worker_cpu=5.0,
        worker_runnable=0.05,
        sim_runnable=0.05,
    )
    return StagePhysics(**{**base, **kw})


def test_physics_of_a_sequence_cap_and_what_spoils_it():
    sc = BY_CAUSE["seq_cap"]
    capped = [
        _stage(2),
        _stage(8, running_max=4.0, waiting_mean=4.0),
        _stage(16, running_max=4.0, waiting_mean=12.0),
    ]
    assert physics_check(sc, capped) == []
    full = [*capped[:2], _stage(16, running_max=4.0, waiting_mean=12.0, kv_max=0.95)]
    assert physics_check(sc, full) == [
        "KV < 50%, worker CPU < 70%, worker and simulator runnable < 75% of the time"
    ]


def test_physics_of_a_starved_worker_needs_it_runnable_nearly_all_the_time_at_the_top():
    sc = BY_CAUSE["client_cpu"]
    starved = [_stage(4, qps=400.0), _stage(32, qps=1000.0), _stage(64, qps=1010.0, worker_runnable=0.97)]
    assert physics_check(sc, starved) == []
    idle = [*starved[:2], _stage(64, qps=1010.0, worker_runnable=0.6)]
    assert physics_check(sc, idle) == ["the worker's main thread runnable > 90% of the top stage"]


def test_the_matrix_marks_expected_cells_and_untrusted_findings():
    text = matrix_text(
        [
            Outcome("client_cpu", "client_bound", {"client_bound": False}),
            Outcome("none", None, {"kv_bound": True}),
        ]
    )
    rows = {line.split()[0]: line for line in text.splitlines()[2:4]}
    assert "[x?]" in rows["client_cpu"] and rows["client_cpu"].rstrip().endswith("ok")
    assert "[.]" in rows["none"] and rows["none"].rstrip().endswith("WRONG")


def test_a_front_end_bottleneck_is_judged_on_the_engines_time_average_queue():
    """At 2 users a stage window holds 3 scrapes: two that caught a request in the few ms between
    its arrival and the next engine step read 0.67 waiting (the 0.5 limit), while the engine's
    queue-time histogram says 0.03 on average. The time-average decides; a real queue still fails."""
    sc = BY_CAUSE["frontend"]
    top = dict(running_max=6.0, engine_ttft_p50_s=0.012, queue_avg=0.06)
    good = [
        _stage(2, waiting_mean=0.67, queue_avg=0.03, write_wait_p50_s=0.006),
        _stage(8, qps=14.0, write_wait_p50_s=0.26, **top),
        _stage(16, qps=14.4, write_wait_p50_s=0.79, **top),
    ]
    assert physics_check(sc, good) == []
    queued = [_stage(2, waiting_mean=0.67, queue_avg=0.6, write_wait_p50_s=0.006), *good[1:]]
    assert physics_check(sc, queued) == ["KV < 50%, waiting < 25% of the users, " + CALM]
    sampled = [_stage(2, waiting_mean=0.67, queue_avg=None, write_wait_p50_s=0.006), *good[1:]]
    assert physics_check(sc, sampled) == [
        "KV < 50%, waiting < 25% of the users, " + CALM
    ]  # no histogram: the scrapes


def test_queue_average_is_littles_law_on_the_queue_histogram():
    stats = StageServerStats(stage=0, duration_s=3.0, latency={"queue": {"mean": 0.0025, "count": 36.0}})
    assert queue_average(stats) == pytest.approx(0.03)
    assert queue_average(StageServerStats(stage=0, duration_s=3.0)) is None
    assert queue_average(None) is None
