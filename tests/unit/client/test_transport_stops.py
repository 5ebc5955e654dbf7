"""A stop that cuts a request mid-stream: the greenlet killed (`GreenletExit`) or a Ctrl-C that
Python raised as `KeyboardInterrupt` in the user's own frame (seen in CI: a plain `locust -f`
interrupted with Ctrl-C lost the request in flight, the user greenlet dying inside
`clock.recv`). Either way: one `cancelled` record with what came so far, then the stop goes on."""

from __future__ import annotations

import _socket
import os
import socket

import gevent
import pytest
from gevent import GreenletExit

from swarm.core.records import Outcome
from tests.unit.client.test_transport_fuzz import HEAD, _OnePool, harness  # noqa: F401 (a fixture)


@pytest.mark.parametrize("stop", [GreenletExit, KeyboardInterrupt], ids=["greenlet-exit", "ctrl-c"])
def test_a_stop_mid_stream_is_one_cancelled_record_and_goes_on(harness, stop):  # noqa: F811
    user, req, fired = harness
    fired["records"].clear()
    client, server = socket.socketpair()
    user.endpoints[0].transport.pool = _OnePool(client)
    first = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    server.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(first), first))

    def send() -> BaseException | None:
        try:
            user.send(req)
        except (GreenletExit, KeyboardInterrupt) as e:  # the user raises the stop again, once recorded
            return e
        return None

    g = gevent.spawn(send)
    peek = _socket.socket(fileno=os.dup(client.fileno()))  # unpatched: never waits
    for _ in range(100):  # until the user has read all that was sent and waits for more
        gevent.sleep(0.05)
        try:
            peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
    peek.close()
    g.kill(stop, block=True, timeout=5)
    server.close()
    assert isinstance(g.value, stop), g.value  # the stop went on after the record
    assert len(fired["records"]) == 1, fired["records"]
    record = fired["records"][0]
    assert record.outcome is Outcome.CANCELLED
    assert record.error.startswith("cut by the swarm's stop while in flight (streaming)")
    assert record.ttft_s is not None  # the first token had come
    assert user.endpoints[0].transport.cut is None
