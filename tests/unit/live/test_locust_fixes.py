"""The Locust workarounds, each against the Locust internals it reaches into."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import pytest
from locust.env import Environment

from swarm.live import locust_fixes


def test_a_report_without_user_classes_count_gets_the_masters_last_counts_first():
    env = Environment()
    seen = []
    env.events.worker_report.add_listener(lambda client_id, data: seen.append(dict(data)))
    runner = SimpleNamespace(clients={"w-1": SimpleNamespace(user_classes_count={"LLMUser": 3})})
    locust_fixes.fill_missing_user_classes_count(env, runner)
    env.events.worker_report.fire(client_id="w-1", data={})
    env.events.worker_report.fire(client_id="w-unknown", data={})
    env.events.worker_report.fire(
        client_id="w-1", data={"user_classes_count": {"LLMUser": 1}, "user_count": 1}
    )
    assert seen == [
        {"user_classes_count": {"LLMUser": 3}, "user_count": 3},
        {"user_classes_count": {}, "user_count": 0},
        {"user_classes_count": {"LLMUser": 1}, "user_count": 1},
    ]


def test_refuse_spawns_passes_every_other_message_on():
    handled = []
    runner = SimpleNamespace(handle_message=lambda msg: handled.append(msg.type))
    locust_fixes.refuse_spawns(runner)
    for kind in ("spawn", "stop", "quit", "spawn"):
        runner.handle_message(SimpleNamespace(type=kind))
    assert handled == ["stop", "quit"]


def test_send_report_now_and_kill_users_now_call_the_runner():
    calls = []
    group = SimpleNamespace(kill=lambda block: calls.append(("kill", block)))
    runner = SimpleNamespace(_send_stats=lambda: calls.append("stats"), user_greenlets=group)
    locust_fixes.send_report_now(runner)
    locust_fixes.kill_users_now(runner)
    gevent.sleep(0)
    assert calls == ["stats", ("kill", True)]


def test_shape_greenlet_and_master_receiving():
    assert locust_fixes.shape_greenlet(SimpleNamespace()) is None
    assert locust_fixes.shape_greenlet(SimpleNamespace(shape_greenlet="g")) == "g"
    assert locust_fixes.master_receiving(SimpleNamespace(greenlet=[1])) is True
    assert locust_fixes.master_receiving(SimpleNamespace(greenlet=[])) is False


def test_receive_message_reads_the_socket_or_times_out():
    msg = SimpleNamespace(node_id="w-1", type="stats", data={"x": 1})
    ready = SimpleNamespace(server=SimpleNamespace(recv_from_client=lambda: ("w-1", msg)))
    assert locust_fixes.receive_message(ready, 1.0) == ("w-1", "stats", {"x": 1})
    silent = SimpleNamespace(server=SimpleNamespace(recv_from_client=lambda: gevent.sleep(5)))
    assert locust_fixes.receive_message(silent, 0.01) is None


def test_internal_error_flag(monkeypatch):
    monkeypatch.setattr(locust_fixes.locust_log, "unhandled_greenlet_exception", False)
    assert locust_fixes.internal_error_logged() is False
    locust_fixes.mark_internal_error()
    assert locust_fixes.internal_error_logged() is True


class _Clients:
    def __init__(self) -> None:
        self.ready: list[str] = []


def _master(monkeypatch, ready_after: int | None, **options):
    """A headless master expecting 2 workers, whose workers are ready after `ready_after` looks
    (None: never); returns (environment, runner, the sleeps asked for)."""
    runner = SimpleNamespace(clients=_Clients())
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if ready_after is not None and len(sleeps) >= ready_after:
            runner.clients.ready = ["w-1", "w-2"]

    monkeypatch.setattr(locust_fixes.gevent, "sleep", sleep)
    parsed = {"headless": True, "expect_workers": 2, "expect_workers_max_wait": 0, **options}
    return SimpleNamespace(parsed_options=SimpleNamespace(**parsed)), runner, sleeps


def test_a_headless_master_looks_for_its_workers_every_50_ms_until_they_are_ready(monkeypatch):
    env, runner, sleeps = _master(monkeypatch, ready_after=3)
    locust_fixes.await_expected_workers(env, runner)
    assert sleeps == [0.05] * 3  # Locust's own loop would have slept a whole second


def test_the_wait_gives_up_quietly_after_5_s_or_the_max_wait(monkeypatch):
    env, runner, sleeps = _master(monkeypatch, ready_after=None)
    locust_fixes.await_expected_workers(env, runner)
    assert len(sleeps) == 100  # 5 s; then Locust's own loop waits, logs and gives up
    env, runner, sleeps = _master(monkeypatch, ready_after=None, expect_workers_max_wait=1)
    locust_fixes.await_expected_workers(env, runner)
    assert len(sleeps) == 20


def test_no_wait_with_a_web_ui_or_workers_already_there(monkeypatch):
    env, runner, sleeps = _master(monkeypatch, ready_after=1, headless=False)
    locust_fixes.await_expected_workers(env, runner)
    env, runner, sleeps2 = _master(monkeypatch, ready_after=1)
    runner.clients.ready = ["w-1", "w-2"]
    locust_fixes.await_expected_workers(env, runner)
    locust_fixes.await_expected_workers(SimpleNamespace(), runner)  # no parsed options (a test's Environment)
    assert sleeps == sleeps2 == []


class Clients(dict):
    @property
    def all(self):
        return self.values()


class QuittingMaster:
    """MasterRunner's face as `quit_once` drives it: stop, the clients, the socket, the greenlet."""

    def __init__(self, workers: list[str]) -> None:
        self.calls: list[str] = []
        self.clients = Clients({w: SimpleNamespace(id=w) for w in workers})
        self.server = SimpleNamespace(send_to_client=lambda m: self.calls.append(f"{m.type} {m.node_id}"))
        self.greenlet = SimpleNamespace(kill=lambda block: self.calls.append("kill"))
        self.quit = lambda: self.calls.append("Locust's own quit")  # replaced, never called

    def stop(self, send_stop_to_client: bool = True) -> None:
        self.calls.append(f"stop {send_stop_to_client}")


def _quitting_master(workers: list[str]) -> QuittingMaster:
    return QuittingMaster(workers)


def test_quit_once_quits_the_first_time_only_and_wakes_when_the_workers_have_left(monkeypatch):
    master = _quitting_master(["w-1", "w-2"])
    sleeps: list[float] = []

    def sleep(s: float) -> None:  # each worker's `quit` handled by the listener, one per look
        sleeps.append(s)
        master.clients.pop(next(iter(master.clients)))

    monkeypatch.setattr(locust_fixes.gevent, "sleep", sleep)
    locust_fixes.quit_once(master)
    master.quit()
    master.quit()  # main's "Shape test completed" and its shutdown: nothing more, no wait
    master.quit()
    assert master.calls == ["stop False", "quit w-1", "quit w-2", "kill"]
    assert sleeps == [locust_fixes.QUIT_POLL_S] * 2  # Locust's own quit slept 0.5 s, three times


def test_a_worker_that_never_leaves_gets_locusts_whole_wait(monkeypatch):
    master = _quitting_master(["w-1"])
    sleeps: list[float] = []
    monkeypatch.setattr(locust_fixes.gevent, "sleep", sleeps.append)
    locust_fixes.quit_once(master)
    master.quit()
    assert master.calls == ["stop False", "quit w-1", "kill"]
    assert sum(sleeps) == pytest.approx(locust_fixes.QUIT_WAIT_S)


def test_a_quit_during_the_first_waits_for_it_to_end():
    import gevent

    master = _quitting_master(["w-1"])
    locust_fixes.quit_once(master)
    first = gevent.spawn(master.quit)
    gevent.sleep(0)  # the first is asleep in its wait for the worker
    gevent.spawn_later(0.02, master.clients.clear)  # the worker's `quit` arrives
    master.quit()  # a SIGTERM's quit: back only once the first has ended
    master.calls.append("second back")
    first.join()
    assert master.calls == ["stop False", "quit w-1", "kill", "second back"]


def test_a_worker_that_joined_mid_test_gets_the_users_once_the_spawn_is_over():
    from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING, WorkerNode, WorkerNodes

    started = []
    clients = WorkerNodes()
    for name, state in (("w-0", STATE_RUNNING), ("w-1", STATE_RUNNING), ("w-late", STATE_INIT)):
        clients[name] = WorkerNode(name)
        clients[name].state = state
    runner = SimpleNamespace(
        state=STATE_SPAWNING,
        spawning_completed=False,
        clients=clients,
        target_user_count=40,
        spawn_rate=1.0,
        # Locust's flag, stuck after a rebalance (locust/dispatch.py): not what decides
        _users_dispatcher=SimpleNamespace(dispatch_in_progress=True),
        start=lambda users, rate: started.append((users, rate)),
    )
    assert not locust_fixes.dispatch_to_late_workers(runner)  # Locust's spawn still under way
    runner.state = STATE_RUNNING
    assert not locust_fixes.dispatch_to_late_workers(runner)  # ... its last reports not in
    runner.spawning_completed = True
    assert locust_fixes.dispatch_to_late_workers(runner) and started == [(40, 1.0)]
    clients["w-late"].state = STATE_RUNNING  # spawned: nothing more to do
    assert not locust_fixes.dispatch_to_late_workers(runner) and started == [(40, 1.0)]
    clients["w-new"] = WorkerNode("w-new")  # with no users to give
    runner.target_user_count = 0
    assert not locust_fixes.dispatch_to_late_workers(runner) and started == [(40, 1.0)]
