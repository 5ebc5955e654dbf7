"""swarm.user's read clock: a chunk's time is when the kernel received it (SO_TIMESTAMPNS), not
when a busy worker got round to reading it; perf_counter() where the OS gives no timestamp."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from swarm import user


def _pair() -> tuple[socket.socket, socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(srv.getsockname())
    server, _ = srv.accept()
    srv.close()
    return client, server


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS: Linux")
def test_a_read_is_timed_at_its_arrival_not_when_it_is_read():
    client, server = _pair()
    with client, server:
        assert user._Clock.enable(client)
        clock = user._Clock(time.perf_counter())
        sent = time.perf_counter()
        server.sendall(b"data: first\n\n")
        after = time.perf_counter()
        time.sleep(0.2)  # the worker is busy elsewhere
        data, t = clock.recv(client)
        read = time.perf_counter()
        assert data == b"data: first\n\n"
        # (loopback: the kernel stamps the bytes during sendall; 50 ms of slack for a busy machine)
        assert sent <= t <= after + 0.05 and read - t >= 0.15, (t - sent, read - t)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS: Linux")
def test_a_timestamp_outside_the_request_falls_back_to_the_read_time():
    client, server = _pair()
    with client, server:
        assert user._Clock.enable(client)
        server.sendall(b"x")
        time.sleep(0.02)
        clock = user._Clock(time.perf_counter())  # "sent" after the bytes arrived: a clock step
        data, t = clock.recv(client)
        assert data == b"x" and t >= clock.t0


def test_without_kernel_timestamps_the_read_time_is_used(monkeypatch):
    monkeypatch.setattr(user, "_SO_TIMESTAMPNS", None)
    client, server = _pair()
    with client, server:
        assert not user._Clock.enable(client)
