"""swarm.client.clock, the user's read clock: a chunk's time is when the kernel received it
(SO_TIMESTAMPNS), not when a busy worker got round to reading it; perf_counter() where the kernel gives no arrival
timestamp (not Linux, or a sandboxed kernel that stamps bytes when they are read)."""

from __future__ import annotations

import socket
import struct
import sys
import time

import pytest

from swarm.client import clock

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS: Linux")


def _pair() -> tuple[socket.socket, socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(srv.getsockname())
    server, _ = srv.accept()
    srv.close()
    return client, server


def _first_read_stamp(gap: float) -> float | None:
    """A new connection's first bytes, read `gap` s after they were sent: how long before the read
    its SO_TIMESTAMPNS (wall clock) says they came, measured here without swarm.live.user. None: the
    read carried no stamp."""
    client, server = _pair()
    with client, server:
        client.setsockopt(socket.SOL_SOCKET, 35, 1)
        server.sendall(b"x")
        time.sleep(gap)
        _data, anc, _f, _a = client.recvmsg(16, socket.CMSG_SPACE(16))
        now = time.time_ns()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == 35:
                sec, nsec = struct.unpack_from("@ll", raw)
                return (now - (sec * 1_000_000_000 + nsec)) * 1e-9
    return None


@linux
def test_the_probe_says_what_the_kernel_does():
    probed = clock.Clock.probe()
    assert clock._probe_arrival_stamps() == probed  # a second look agrees
    lags = [_first_read_stamp(0.1) for _ in range(5)]
    if probed:
        # and, the probe holding stamping on, every new connection's first bytes are stamped
        # at their arrival (without that, Linux stamps them only once its deferred switch is on)
        assert all(lag is not None and 0.05 <= lag < 1.0 for lag in lags), lags
    else:
        assert all(lag is None or lag < 0.05 for lag in lags), lags


@linux
def test_a_read_is_timed_at_its_arrival_not_when_it_is_read():
    client, server = _pair()
    with client, server:
        enabled = clock.Clock.enable(client)
        assert enabled == clock.Clock.probe()
        timer = clock.Clock(time.perf_counter())
        sent = time.perf_counter()
        server.sendall(b"data: first\n\n")
        after = time.perf_counter()
        time.sleep(0.2)  # the worker is busy elsewhere
        if enabled:
            data, t = timer.recv(client)
        else:  # the user's own path on such a kernel: recv() and perf_counter()
            data, t = client.recv(1024), time.perf_counter()
        read = time.perf_counter()
        assert data == b"data: first\n\n"
        if enabled:
            # (loopback: the kernel stamps the bytes during sendall; 50 ms of slack for a busy machine)
            assert sent <= t <= after + 0.05 and read - t >= 0.15, (t - sent, read - t)
        else:
            assert after + 0.15 <= t <= read, (t - sent, read - t)


@linux
def test_a_timestamp_outside_the_request_falls_back_to_the_read_time():
    client, server = _pair()
    with client, server:
        client.setsockopt(socket.SOL_SOCKET, 35, 1)  # whatever the kernel stamps, if anything
        server.sendall(b"x")
        time.sleep(0.02)
        timer = clock.Clock(time.perf_counter())  # "sent" after the bytes arrived: a clock step
        data, t = timer.recv(client)
        assert data == b"x" and t >= timer.t0


def test_without_kernel_timestamps_the_read_time_is_used(monkeypatch):
    monkeypatch.setattr(clock, "_SO_TIMESTAMPNS", None)
    client, server = _pair()
    with client, server:
        assert not clock.Clock.enable(client)
        assert not clock._probe_arrival_stamps()


def test_a_kernel_that_stamps_at_read_time_is_not_trusted(monkeypatch):
    monkeypatch.setattr(clock.Clock, "_arrival", False)
    client, server = _pair()
    with client, server:
        assert not clock.Clock.enable(client)
