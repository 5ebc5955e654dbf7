"""The receive clock: when each read's bytes arrived, by the kernel's receive timestamp.

The time of each read is the kernel's receive time of its bytes (Linux `SO_TIMESTAMPNS`: the
arrival of the last packet the read returned), not the moment this process got round to the
`recv()`: a busy worker (other streams' chunks to parse, a report to send) would otherwise add
its own queueing to TTFT and ITL. Where the OS gives no timestamp, it is `time.perf_counter()`
right after the read. See docs/metrics.md, "Clocks".
"""

from __future__ import annotations

import logging
import socket
import struct
import sys
import time
from typing import Any

log = logging.getLogger(__name__)

BLOCK_SIZE = 64 * 1024  # bytes per recv(); one SSE chunk is ~200-300 bytes

# Kernel receive timestamps: SO_TIMESTAMPNS (Linux: 35, not exported by Python's socket module);
# the control message carries a struct timespec of CLOCK_REALTIME.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("@ll")
if _TIMESPEC.size != 16:  # a 32-bit time_t: no kernel timestamps
    _SO_TIMESTAMPNS = None
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if _SO_TIMESTAMPNS is not None else 0


class Clock:
    """One request's read times: the kernel's receive timestamp of each read (`SO_TIMESTAMPNS`,
    wall clock) mapped onto this request's `perf_counter()` timeline, else `perf_counter()`.

    A timestamp is used only when it falls between the send and now: a wall-clock step during
    the request (NTP) cannot make a read arrive before the request left or after it was read.
    """

    __slots__ = ("offset_ns", "t0")

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        # wall - monotonic in integer ns (exact; floats of epoch seconds resolve only 0.24 us). The
        # wall clock is read first, so the offset errs small and mapped times err late, never early.
        self.offset_ns = time.time_ns() - time.perf_counter_ns()

    _arrival: bool | None = None  # what probe() found, once per process

    @staticmethod
    def enable(sock: Any) -> bool:
        """Ask the kernel to timestamp what this socket receives; False where it cannot, or where
        its stamps are not arrival times (see `probe`)."""
        if _SO_TIMESTAMPNS is None or not Clock.probe():
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        except OSError:
            return False
        return hasattr(sock, "recvmsg")

    @staticmethod
    def probe() -> bool:
        """Whether this kernel stamps received TCP bytes when they arrive; found once per process.

        Linux does. A sandboxed kernel (gVisor, say) may accept SO_TIMESTAMPNS yet stamp the bytes
        when they are read: no better than `perf_counter()`, and a `recvmsg` dearer. So: send a
        byte over loopback, read it `PROBE_GAP_S` later, and trust the stamps only if the byte's
        stamp is at least half that gap older than the read.
        """
        if Clock._arrival is None:
            Clock._arrival = _probe_arrival_stamps()
        return Clock._arrival

    def recv(self, sock: Any) -> tuple[bytes, float]:
        """One read (recvmsg) and its time."""
        data, anc, _flags, _addr = sock.recvmsg(BLOCK_SIZE, _ANC_SIZE)
        now = time.perf_counter()
        t = self.stamp(anc, now)
        return data, now if t is None else t

    def stamp(self, anc: list[tuple[int, int, bytes]], now: float) -> float | None:
        """The receive timestamp in a read's ancillary data, on this request's timeline; None if
        there is none or it falls outside [send, now)."""
        for level, kind, raw in anc:
            if kind == _SO_TIMESTAMPNS and level == socket.SOL_SOCKET and len(raw) >= 16:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                t = (sec * 1_000_000_000 + nsec - self.offset_ns) * 1e-9
                if self.t0 <= t < now:
                    return t
        return None


PROBE_GAP_S = 0.02
PROBE_TRIES = 10
_stamp_holder: socket.socket | None = None  # see _probe_arrival_stamps


def _probe_arrival_stamps() -> bool:
    """Linux turns receive timestamping on for the whole system only while some socket asks for
    it, and the first such socket turns it on a moment later (a deferred static key): until then
    bytes arrive unstamped, and the first packets of every new connection would get read times.
    So one timestamping UDP socket is held open for the life of the process, and the probe then
    waits for stamps to come (a few tries) before judging them."""
    global _stamp_holder
    if _SO_TIMESTAMPNS is None:
        return False
    try:
        if _stamp_holder is None:
            holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            holder.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            _stamp_holder = holder
        for _ in range(PROBE_TRIES):
            lag = _stamp_lag(PROBE_GAP_S)
            if lag is None:
                continue
            if lag < PROBE_GAP_S / 2:
                log.info("this kernel stamps TCP bytes when they are read: chunk times are read times")
            return lag >= PROBE_GAP_S / 2
        log.info("this kernel gives no receive timestamps: chunk times are read times")
        return False
    except OSError as e:
        log.info("kernel receive timestamps unavailable (%s): chunk times are read times", e)
        return False


def _stamp_lag(gap: float) -> float | None:
    """Send a byte over loopback, read it `gap` s later: how long before the read its stamp says
    it came (None: no stamp)."""
    with (
        socket.create_server(("127.0.0.1", 0)) as srv,
        socket.create_connection(srv.getsockname(), timeout=5) as client,
    ):
        client.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        peer, _ = srv.accept()
        with peer:
            clock = Clock(time.perf_counter())
            peer.sendall(b"x")
            time.sleep(gap)
            _data, anc, _flags, _addr = client.recvmsg(BLOCK_SIZE, _ANC_SIZE)
            now = time.perf_counter()
            t = clock.stamp(anc, now)
            return None if t is None else now - t
