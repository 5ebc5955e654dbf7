"""swarm/stats/cpu.py: each worker's CPU demand per stage (CPU time + run-queue wait) and the
90% rule that calls a stage client-bound. In real Locust processes: tests/integration/test_client_bound.py."""

from __future__ import annotations

import time

import pytest

from swarm.stats.cpu import ClientLoad, CpuMeter, run_queue_wait_s


def test_cpu_meter_counts_time_to_the_running_stage_only():
    meter = CpuMeter()
    meter.sample(None)  # not running: dropped
    t = time.thread_time()
    while time.thread_time() - t < 0.05:  # burn 50 ms of this thread
        pass
    meter.sample(2)
    ((stage, cpu, wall, wait),) = meter.take()
    # the process's CPU (all threads: a library's native thread may work beside this one just
    # after the imports, so cpu may pass wall) holds at least the 50 ms burnt here
    assert stage == 2 and cpu >= 0.05 and wall >= 0.045 and wait >= 0.0
    assert meter.take() == []


def test_a_starved_worker_is_judged_by_what_it_wanted(tmp_path):
    """A worker that got a quarter of a core while its loop was runnable all the time: its CPU
    share says 25%, its demand (CPU + the kernel's run-queue wait) says 98%: client-bound."""
    stat = tmp_path / "schedstat"
    stat.write_text("0 0 1\n")
    meter = CpuMeter(wait_source=str(stat))
    stat.write_text("250000000 7300000000 99\n")  # 7.3 s runnable but waiting for a CPU
    meter.sample(0)
    ((_stage, _cpu, _wall, wait),) = meter.take()
    assert wait == pytest.approx(7.3)
    load = ClientLoad()
    load.add("w1", [[0, 2.5, 10.0, 7.3]])
    assert load.bound() == {0: ("w1", pytest.approx(98.0))}
    assert load.split(0, "w1") == (pytest.approx(25.0), pytest.approx(73.0))
    line = ClientLoad.lines("w1", [[0, 2.5, 10.0, 7.3]], 1.0)[0]
    assert ClientLoad.from_lines([line]).bound() == load.bound()
    # a file that is not there (not Linux): no wait known, the CPU share alone
    blind = CpuMeter(wait_source=str(tmp_path / "missing"))
    blind.sample(0)
    assert [e[3] for e in blind.take()] == [0.0]
    assert run_queue_wait_s(str(tmp_path / "missing")) == 0.0
    load = ClientLoad()
    load.add("w1", [[0, 2.5, 10.0]])  # an older worker's entry
    assert load.bound() == {}


def test_client_load_flags_stages_where_a_worker_averaged_over_90_percent():
    load = ClientLoad()
    load.add("w1", [[0, 1.0, 10.0], [1, 9.5, 10.0]])
    load.add("w2", [[1, 9.0, 10.0], [1, 0.9, 1.0], [2, 1.0, 1.0]])  # stage 2: too short to judge
    assert load.bound() == {1: ("w1", 95.0)}
    assert load.busiest() == pytest.approx(95.0)
    load.add("w2", [[0, 9.2, 10.0]])
    assert set(load.bound()) == {0, 1}
