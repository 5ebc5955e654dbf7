"""A client that hangs up on purpose (`--cancel`, swarm/client/transport.py `CutPoint`): after N
tokens or after a time, the exchange ends `cancelled_by_client` and the socket is closed (the
server reads its end of the connection); an answer that ends before the cut point is `ok`."""

from __future__ import annotations

import socket
import time

import gevent
import pytest

from swarm.client.dialects import get_dialect
from swarm.client.tally import StreamTally
from swarm.client.transport import CutPoint, Transport
from swarm.core.records import Outcome, RequestRecord
from tests.unit.client.test_transport_fuzz import HEAD, _OnePool


def _event(n: int) -> bytes:
    usage = b'{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}' % (n, n + 3)
    return b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"t%d"}}],"usage":%s}\n\n' % (n, usage)


def _chunk(b: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(b), b)


def _exchange(events: list[bytes], cut: CutPoint | None, done: bool = False, pause_s: float = 0.0):
    """Serve `events` on a socket pair (then [DONE] when `done`, else keep the stream open);
    (outcome, error, seconds the exchange took, whether the server saw the client close)."""
    client, server = socket.socketpair()
    transport = Transport(_OnePool(client), b"POST /v1/chat/completions HTTP/1.1\r\n", "", 5.0, None)
    closed = []

    def serve() -> None:
        server.recv(65536)
        server.settimeout(0.3 if done else 3)
        try:
            server.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
            for e in events:
                server.sendall(_chunk(e))
                gevent.sleep(pause_s)
            if done:
                server.sendall(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            closed.append(server.recv(1) == b"")
        except OSError:  # a broken pipe or a reset: the client's end is closed
            closed.append(True)
        server.close()

    g = gevent.spawn(serve)
    tally = StreamTally(get_dialect("vllm"), True)
    t0 = time.perf_counter()
    outcome, error, _, _ = transport.exchange(b"x", tally, RequestRecord("w", 0.0), cut)
    took = time.perf_counter() - t0
    if outcome is not Outcome.OK:
        client.close()  # (closed by the released response already; a no-op then)
    g.join(timeout=5)
    return outcome, error, took, tally, closed


def test_after_n_tokens_the_client_hangs_up_and_closes_the_socket():
    outcome, error, _, tally, closed = _exchange(
        [_event(1), _event(2), _event(3)], CutPoint(after_tokens=2, when="after 2 tokens"), pause_s=0.05
    )
    assert outcome is Outcome.CANCELLED_BY_CLIENT
    assert error == "the client hung up after 2 tokens (--cancel)"
    assert tally.tokens_so_far == 2  # it read no further
    assert closed == [True]


def test_at_the_first_token():
    outcome, _, _, tally, _ = _exchange([_event(1), _event(2)], CutPoint(after_tokens=1), pause_s=0.05)
    assert outcome is Outcome.CANCELLED_BY_CLIENT and tally.tokens_so_far == 1


def test_after_a_time_the_client_hangs_up_wherever_it_waits():
    outcome, error, took, tally, closed = _exchange(
        [_event(1)], CutPoint(after_s=0.3, when="0.3s after sending")
    )
    assert outcome is Outcome.CANCELLED_BY_CLIENT and "0.3s after sending" in error
    assert 0.25 < took < 2.0 and tally.tokens_so_far == 1
    assert closed == [True]


@pytest.mark.parametrize("cut", [CutPoint(after_tokens=10), CutPoint(after_s=3.0), None])
def test_an_answer_that_ends_before_the_cut_point_is_ok(cut):
    outcome, error, took, tally, _ = _exchange([_event(1), _event(2), _event(3)], cut, done=True)
    assert (outcome, error) == (Outcome.OK, None) and tally.tokens_so_far == 3 and took < 2.0
