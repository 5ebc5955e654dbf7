"""An IP-literal target is resolved once (the C resolver, no thread); a hostname per connection."""

from __future__ import annotations

import socket

import pytest
from geventhttpclient.connectionpool import ConnectionPool

from swarm.client.addresses import pin_numeric_address


@pytest.fixture
def listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s


def test_an_ip_literal_is_resolved_once_and_connects(listener, monkeypatch):
    port = listener.getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, "127.0.0.1", port, size=2)
    assert pin_numeric_address(pool)
    resolved = pool._resolve()
    assert [(info[0], info[-1]) for info in resolved] == [(socket.AF_INET, ("127.0.0.1", port))]

    def no_resolver(*_a, **_k):
        raise AssertionError("gevent's resolver was asked")

    monkeypatch.setattr("gevent.socket.getaddrinfo", no_resolver)
    sock = pool.get_socket()  # a real connection, on the pinned address
    try:
        assert sock.getpeername() == ("127.0.0.1", port)
    finally:
        sock.close()


def test_an_ipv6_literal_is_pinned_and_a_hostname_is_not():
    pool6 = ConnectionPool("::1", 8000, "::1", 8000, size=1)
    assert pin_numeric_address(pool6) and pool6._resolve()[0][0] == socket.AF_INET6
    named = ConnectionPool("localhost", 8000, "localhost", 8000, size=1)
    before = named._resolve
    assert not pin_numeric_address(named)
    assert named._resolve == before  # resolved per connection, as geventhttpclient does
