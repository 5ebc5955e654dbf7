"""SlotQueue (swarm/client/on_time.py): free users take arrival slots in order, the head sleeps until
its slot, and a busy reader hands the loop to a due head at once instead of after its batch."""

from __future__ import annotations

import socket
import time

import gevent
from gevent import socket as gsocket

from swarm.client.on_time import SlotQueue


def slots_from(start: float, gap: float, taken: list[float]):
    """A schedule: slots `gap` apart from `start`; `taken` records when each was read."""
    nxt = [start]

    def next_slot() -> float:
        taken.append(time.perf_counter())
        slot = nxt[0]
        nxt[0] += gap
        return slot

    return next_slot


def test_a_slot_in_the_past_is_returned_without_a_wait() -> None:
    q = SlotQueue()
    past = time.perf_counter() - 1.0
    assert q.wait_for_slot(lambda: past) == past
    assert len(q) == 0 and q.due == float("inf")


def test_users_take_the_slots_in_order_and_read_the_schedule_at_the_head() -> None:
    q = SlotQueue()
    taken: list[float] = []
    next_slot = slots_from(time.perf_counter() + 0.03, 0.02, taken)
    got: list[tuple[int, float, float]] = []

    def user(i: int) -> None:
        slot = q.wait_for_slot(next_slot)
        got.append((i, slot, time.perf_counter()))

    users = [gevent.spawn(user, i) for i in range(4)]
    gevent.sleep(0)
    assert len(q) == 4 and len(taken) == 1  # one slot handed out: the head's
    gevent.joinall(users, timeout=5)
    assert [i for i, _, _ in got] == [0, 1, 2, 3]
    slots = [s for _, s, _ in got]
    assert slots == sorted(slots) and len(set(slots)) == 4
    assert all(woke >= slot for _, slot, woke in got)  # nobody leaves before its slot
    # each later slot was read when its user reached the head, after the one before it had left
    assert all(t >= s for t, s in zip(taken[1:], slots[:-1], strict=True))
    assert len(q) == 0 and q.due == float("inf")


def test_a_killed_user_passes_its_turn_on() -> None:
    q = SlotQueue()
    taken: list[float] = []
    next_slot = slots_from(time.perf_counter() + 0.05, 0.01, taken)
    got: list[int] = []

    def user(i: int) -> None:
        q.wait_for_slot(next_slot)
        got.append(i)

    users = [gevent.spawn(user, i) for i in range(4)]
    gevent.sleep(0)
    users[0].kill()  # the head
    users[2].kill()  # one in line
    gevent.joinall(users, timeout=5)
    assert got == [1, 3]
    assert len(taken) == 3  # the killed head's slot, then one per user still waiting
    assert len(q) == 0


def _busy(s: float) -> None:
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


def test_a_due_head_goes_before_the_rest_of_a_read_batch() -> None:
    """Forty sockets readable at once: the loop runs all forty readers before its timers. A reader
    that finds the head due hands over at once, so the head sends mid-batch, not after it."""
    q = SlotQueue()
    pairs = [socket.socketpair() for _ in range(40)]
    order: list[str] = []

    def reader(i: int, s: socket.socket) -> None:
        sock = gsocket.socket(fileno=s.detach())
        sock.recv(16)
        t = time.perf_counter()
        if t >= q.due:
            q.send_due()
        order.append(f"r{i}")
        _busy(0.002)  # a chunk's parse, exaggerated
        sock.close()

    readers = [gevent.spawn(reader, i, b) for i, (_a, b) in enumerate(pairs)]
    gevent.sleep(0.01)  # every reader waits in recv()

    def head() -> None:
        q.wait_for_slot(lambda: time.perf_counter() + 0.02)
        order.append("H")

    h = gevent.spawn(head)
    gevent.sleep(0)
    assert q.due < float("inf")
    for a, _b in pairs:
        a.send(b"x")  # one batch: every reader readable in the same poll
    gevent.joinall([*readers, h], timeout=5)
    assert "H" in order and len(order) == 41
    # due 20 ms in, the batch 80 ms long: the head leaves within a few reads of its slot
    assert order.index("H") < 20, order
    for a, _b in pairs:
        a.close()


def test_without_reads_the_head_wakes_by_its_timer() -> None:
    q = SlotQueue()
    start = time.perf_counter()
    slot = q.wait_for_slot(lambda: start + 0.02)
    assert slot == start + 0.02 and time.perf_counter() >= slot


def test_a_reader_thrown_into_while_the_head_runs_is_not_resumed_later() -> None:
    """A stop (or a deadline) thrown in by the hub while the reader has handed the loop to the head
    ends the hand-off there; the reader's pending resumption is cancelled, so nothing switches into
    the reader later, in the middle of another wait."""
    q = SlotQueue()
    events: list[str] = []

    def head() -> None:
        q.wait_for_slot(lambda: time.perf_counter() + 0.001)
        events.append("H")
        gevent.sleep(0.02)  # blocks: the hub runs on, and throws into the reader first

    def reader() -> None:
        me = gevent.getcurrent()
        gevent.get_hub().loop.run_callback(me.throw, gevent.GreenletExit)  # (queued before the hand-off)
        _busy(0.005)
        try:
            q.send_due()
        except gevent.GreenletExit:
            events.append("stopped")
        t = time.perf_counter()
        gevent.sleep(0.03)  # a stale resumption would end this early (or raise InvalidSwitchError)
        events.append(f"slept {time.perf_counter() - t >= 0.02}")  # (the loop time may lag a little)

    h = gevent.spawn(head)
    gevent.sleep(0)
    r = gevent.spawn(reader)
    gevent.joinall([h, r], timeout=5)
    assert r.successful(), r.exception
    assert events == ["H", "stopped", "slept True"]


def test_send_due_with_nobody_waiting_does_nothing() -> None:
    q = SlotQueue()
    q.send_due()
    assert len(q) == 0 and q.due == float("inf")


def test_a_chore_runs_from_a_read_once_its_turn_came_and_not_before() -> None:
    q = SlotQueue()
    ran: list[float] = []

    def chore() -> None:
        ran.append(time.perf_counter())
        q.chore_done()

    q.set_chore(chore, 0.01)
    assert q.due == float("inf")  # nobody waits for a slot: the reads leave the clock alone
    q.send_due()  # a read before its turn
    assert ran == []
    _busy(0.011)
    q.send_due()
    assert len(ran) == 1 and q._chore_at >= ran[0] + 0.01
    q.send_due()  # its next turn has not come
    assert len(ran) == 1
    q.set_chore(None)
    assert q.due == float("inf")


def test_the_due_time_is_the_earlier_of_the_head_and_the_chore() -> None:
    q = SlotQueue()
    q.set_chore(q.chore_done, 10.0)
    chore_at = q._chore_at
    slot = time.perf_counter() + 0.02
    h = gevent.spawn(q.wait_for_slot, lambda: slot)
    gevent.sleep(0)
    assert q.due == slot < chore_at
    h.join(timeout=5)
    assert h.value == slot and q.due == float("inf")  # nobody waits any more
    slot2 = time.perf_counter() + 20.0
    h2 = gevent.spawn(q.wait_for_slot, lambda: slot2)
    gevent.sleep(0)
    assert q.due == chore_at < slot2
    h2.kill()
    assert q.due == float("inf")
    q.set_chore(None)


def test_a_new_schedule_gives_the_waiting_head_its_slot() -> None:
    q = SlotQueue()
    first = time.perf_counter() + 1.0
    schedule = {"next": slots_from(first, 1.0, [])}  # 1 req/s: a second away
    got: list[tuple[float, float]] = []

    def user() -> None:
        slot = q.wait_for_slot(lambda: schedule["next"]())
        got.append((slot, time.perf_counter()))

    g = gevent.spawn(user)
    gevent.sleep(0.01)
    q.reschedule()  # the same schedule: the head takes its next slot, a second later still
    assert len(q) == 1 and q.due == first + 1.0
    start = time.perf_counter() + 0.02
    schedule["next"] = slots_from(start, 0.025, [])  # the stage changes to 40 req/s
    q.reschedule()
    g.join(timeout=5)
    ((slot, woke),) = got
    assert slot == start and woke >= start  # the new stage's first slot, not the old one a second on
    assert len(q) == 0 and q.due == float("inf")
    q.reschedule()  # nobody waits: nothing to do
