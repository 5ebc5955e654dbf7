"""The master's side of trace replay (swarm/live/replay_schedule.py `Dispatcher`), in-process with a stand-in
for Locust's master runner (its `clients` and `send_message`): leases balanced over ready workers,
a lost worker's unsent rows leased again exactly once, a worker that comes back taking rows again,
a row claimed twice counted. The same in real processes: tests/integration/test_trace_replay.py."""

from __future__ import annotations

import time
from types import SimpleNamespace

from locust.runners import STATE_MISSING, STATE_RUNNING

from swarm.live import replay_schedule
from swarm.live.replay_schedule import LEASE, REVOKE, Dispatcher
from swarm.load.trace import Trace, TraceRow


class Master:
    """Locust's MasterRunner as the dispatcher uses it."""

    def __init__(self, *workers: str) -> None:
        self.clients = {w: SimpleNamespace(id=w, state=STATE_RUNNING) for w in workers}
        self.sent: list[tuple[str, str, object]] = []

    def send_message(self, msg_type: str, data: object = None, client_id: str | None = None) -> None:
        self.sent.append((msg_type, client_id or "", data))

    def leased(self, worker: str) -> list[int]:
        return [v[1] for t, w, d in self.sent if t == LEASE and w == worker for v in d["rows"]]  # type: ignore[index]


def trace(n: int, every_s: float = 0.01) -> Trace:
    rows = tuple(TraceRow(i, i * every_s, 100, 10) for i in range(n))
    return Trace("t.jsonl", "mooncake", rows, n, 16, 1.0)


def dispatcher(runner: Master, n: int = 40) -> Dispatcher:
    d = Dispatcher(runner, trace(n), max_lag_s=1.0)
    d.started_at = time.time()
    return d


def test_leases_wait_for_every_worker_then_balance():
    m = Master("a", "b")
    d = dispatcher(m)
    d.ready.add("a")
    d.tick()
    assert d.t0 is None and not m.sent  # b is connected and still building its prompts
    d.ready.add("b")
    d.tick()
    assert d.t0 is not None
    a, b = m.leased("a"), m.leased("b")
    assert sorted(a + b) == list(range(40)) and abs(len(a) - len(b)) <= 1  # due within the lease horizon


def test_a_lost_worker_s_rows_go_to_the_others_once_and_it_takes_rows_when_back(monkeypatch):
    m = Master("a", "b")
    d = dispatcher(m, n=400)  # 4 s of rows: leased 2 s ahead, in two goes
    d.ready |= {"a", "b"}
    d.tick()
    first_b = m.leased("b")
    for row in first_b[:3]:
        d.on_claim("b", row, 0.0)
    m.clients["b"].state = STATE_MISSING
    d.tick()
    assert "b" in d.lost and d.reassigned["b"] == len(first_b) - 3
    assert (REVOKE, "b", None) in m.sent
    # b's unsent rows went to a, once; the three it claimed stay its own
    a = m.leased("a")
    assert sorted(set(a)) == sorted(a) and set(first_b[3:]) <= set(a) and not set(first_b[:3]) & set(a)
    # b comes back (heartbeats again): it takes new rows, none it had before
    m.clients["b"].state = STATE_RUNNING
    monkeypatch.setattr(replay_schedule.time, "time", lambda: d.t0 + 3.0)  # later rows come due
    d.tick()
    assert "b" not in d.lost
    again = [r for r in m.leased("b") if r not in first_b]
    assert again and not set(again) & set(a)
    assert d.summary()["reassigned_from"] == {"b": len(first_b) - 3}


def test_a_row_claimed_twice_is_counted_and_the_replay_finishes_on_done():
    m = Master("a")
    d = dispatcher(m, n=3)
    d.ready.add("a")
    d.tick()
    for row in range(3):
        d.on_claim("a", row, 0.002)
    d.on_claim("a", 1, 0.0)
    assert d.duplicates == 1 and not d.finished
    for row in range(3):
        d.on_done("a", row)
    assert d.finished and d.summary()["sent"] == 3 and d.summary()["unsent"] == 0
