"""swarm/live/balance.py: round-robin and least-inflight over several endpoints, and a dead
endpoint (connection refused, fast) taken out for a back-off instead of taking the traffic."""

from __future__ import annotations

import pytest

from swarm.core.records import Outcome
from swarm.live.balance import BACKOFF_MAX_S, BACKOFF_S, DEAD_AFTER, Balancer

EPS = ("http://a:1", "http://b:2", "http://c:3")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_round_robin_takes_each_endpoint_in_turn():
    b = Balancer(EPS)
    picks = []
    for _ in range(9):
        i = b.pick()
        picks.append(i)
        b.done(i, Outcome.OK)
    assert picks == [0, 1, 2] * 3 and b.in_flight == [0, 0, 0]


def test_least_inflight_takes_the_least_busy_and_breaks_ties_in_turn():
    b = Balancer(EPS, "least-inflight")
    assert [b.pick() for _ in range(3)] == [0, 1, 2]  # all at 0: in turn
    assert b.in_flight == [1, 1, 1]
    b.done(1, Outcome.OK)
    assert b.pick() == 1  # the only one with fewer
    b.done(0, Outcome.OK)
    b.done(2, Outcome.OK)
    assert b.in_flight == [0, 1, 0]
    assert [b.pick(), b.pick()] == [2, 0]  # tie between 0 and 2: the turn goes on from 1's successor
    assert b.in_flight == [1, 1, 1]


@pytest.mark.parametrize("policy", ["round-robin", "least-inflight"])
def test_a_dead_endpoint_is_passed_over_for_a_back_off_then_tried_again(policy):
    clock = Clock()
    b = Balancer(EPS[:2], policy, clock)
    sent = [0, 0]
    # endpoint 1 refuses connections at once; endpoint 0 answers, its requests stay in flight a while
    held = []
    for _ in range(50):
        i = b.pick()
        sent[i] += 1
        if i == 1:
            b.done(1, Outcome.CONNECT_ERROR)
        else:
            held.append(i)
    assert sent[1] == DEAD_AFTER  # then it is out: everything goes to 0 (least-inflight would pour into 1)
    assert sent[0] == 50 - DEAD_AFTER and b.out(1)
    first_out = 2 * DEAD_AFTER if policy == "round-robin" else DEAD_AFTER + 1  # least: 0 holds one
    assert b.skipped == [0, 50 - first_out]  # every pick while it was out went to 0 instead
    for i in held:
        b.done(i, Outcome.OK)
    clock.t += BACKOFF_S  # the back-off is over: tried again, refused again, out twice as long
    for _ in range(DEAD_AFTER * 2):
        i = b.pick()
        b.done(i, Outcome.CONNECT_ERROR if i == 1 else Outcome.OK)
    assert b.out(1)
    clock.t += BACKOFF_S * 2 - 0.01
    assert b.out(1)
    clock.t += 0.02
    assert not b.out(1)
    while (i := b.pick()) != 1:
        b.done(i, Outcome.OK)
    b.done(1, Outcome.HTTP_ERROR)  # it answers (an error, but it answers): back for good
    for _ in range(DEAD_AFTER - 1):  # a new failure run starts from nothing, back-off from BACKOFF_S
        b.done(b.pick(), Outcome.CONNECT_ERROR)
    assert not b.out(1)


def test_the_back_off_doubles_up_to_its_cap_and_every_endpoint_out_still_sends():
    clock = Clock()
    b = Balancer(EPS[:2], "round-robin", clock)
    backoffs = []
    for _ in range(7):
        for _ in range(DEAD_AFTER):
            b.pick()
            b.done(1, Outcome.CONNECT_ERROR)
        until = b._out_until[1]
        backoffs.append(until - clock.t)
        clock.t = until
    assert backoffs == [min(BACKOFF_S * 2**k, BACKOFF_MAX_S) for k in range(7)]
    for i in (1, 0):  # 1 out again (16 s), then 0 dies too (1 s): both out
        for _ in range(DEAD_AFTER):
            b.pick()
            b.done(i, Outcome.CONNECT_ERROR)
    assert b.out(0) and b.out(1)
    assert b.pick() == 0  # the request still goes: to the one back first (0: out for 1 s, 1 for 16 s)


def test_one_endpoint_is_never_taken_out_and_cancelled_requests_are_no_sign():
    b = Balancer(EPS[:1])
    for _ in range(DEAD_AFTER * 3):
        assert b.pick() == 0
        b.done(0, Outcome.CONNECT_ERROR)
    assert not b.out(0) and b.in_flight == [0]
    two = Balancer(EPS[:2])
    for _ in range(DEAD_AFTER * 2):
        two.pick()
        two.done(1, Outcome.CANCELLED)
    assert not two.out(1)
    with pytest.raises(ValueError, match="unknown balance policy"):
        Balancer(EPS, "random")
