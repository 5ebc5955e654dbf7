"""The master's watch over its workers: missing, back, final reports, in flight."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from locust.runners import STATE_MISSING, STATE_RUNNING

from swarm.live import worker_health
from swarm.live.worker_health import WorkerHealth, collect_final_reports


def _runner(**states):
    clients = {w: SimpleNamespace(id=w, state=s) for w, s in states.items()}
    return SimpleNamespace(clients=clients)


def test_missing_worker_is_degraded_once_and_back_when_it_reports(caplog):
    h = WorkerHealth()
    h.connected("w-1")
    h.reported("w-1")
    with caplog.at_level(logging.WARNING):
        h.check(_runner(**{"w-1": STATE_MISSING, "w-2": STATE_RUNNING}))
        h.check(_runner(**{"w-1": STATE_MISSING}))
    assert list(h.degraded) == ["w-1"] and h.degraded["w-1"]["reason"] == "missed heartbeats"
    assert h.degraded["w-1"]["last_report_at"] is not None
    assert caplog.text.count("run degraded") == 1
    assert not h.alive("w-1")
    h.reported("w-1")
    assert h.alive("w-1") and h.degraded["w-1"]["reconnected_at"]
    assert "back at" in h.lines()[0]


def test_in_flight_counts_live_workers_and_note_reads_the_report():
    h = WorkerHealth()
    assert h.in_flight_total() is None
    h.note("w-1", {"in_flight": 3, "stopped": False})  # type: ignore[typeddict-item]
    h.note("w-2", {"in_flight": 4, "stopped": True, "internal_error": True})  # type: ignore[typeddict-item]
    h.note("local", {"internal_error": True})  # type: ignore[typeddict-item]
    assert h.in_flight_total() == 7
    assert h.stopped == {"w-1": False, "w-2": True, "local": False}
    assert h.internal_errors == {"w-2"}
    h.mark_degraded("w-2", "sent no final report")
    assert h.in_flight_total() == 3
    h.clear()
    assert h.in_flight_total() is None and not h.degraded


def test_collect_final_reports_reads_until_every_worker_sent_its_last(monkeypatch):
    h = WorkerHealth()
    for w in ("w-1", "w-2", "w-3"):
        h.connected(w)
    h.stopped["w-3"] = True  # already final
    messages = [("w-1", "heartbeat", {}), ("w-1", "stats", {"last": True})]
    fired = []

    def fire(client_id, data):
        fired.append(client_id)
        h.stopped[client_id] = data["last"]

    monkeypatch.setattr(worker_health.locust_fixes, "master_receiving", lambda runner: False)
    monkeypatch.setattr(
        worker_health.locust_fixes, "receive_message", lambda runner, t: messages.pop(0) if messages else None
    )
    env = SimpleNamespace(stop_timeout=0, events=SimpleNamespace(worker_report=SimpleNamespace(fire=fire)))
    collect_final_reports(env, _runner(), h)
    assert fired == ["w-1"]
    assert list(h.degraded) == ["w-2"] and h.degraded["w-2"]["reason"] == "sent no final report"


def test_collect_final_reports_lets_a_listening_master_quit_first(monkeypatch):
    quit_calls = []
    runner = SimpleNamespace(clients={}, quit=lambda: quit_calls.append(1))
    monkeypatch.setattr(worker_health.locust_fixes, "master_receiving", lambda r: True)
    collect_final_reports(SimpleNamespace(stop_timeout=None), runner, WorkerHealth())
    assert quit_calls == [1]
