"""HTTP/1.1 for one streamed request, on geventhttpclient's socket, read by hand.

FastHttpSession fires its `request` event at the headers (REFERENCE.md §4) and
`FastResponse.read(n)` blocks until n bytes are buffered, so neither sees individual chunks
arrive. The transport takes a socket from the process's pool for the origin
(swarm/client/shared_pool.py), sends the request itself, reads the socket itself (timing each read
with swarm/client/clock.py) and lets geventhttpclient's parser take the status and headers and
de-chunk the body; SSE payloads go to the stream tally (swarm/client/tally.py) as they come.

`exchange` never raises for anything the server or the network does: every failure becomes one
`Outcome` with a message, through `failure`, the one mapping from what went wrong to how the
request is recorded (the swarm's own `RequestFailure`s carry their outcome).

A stop that kills the user's greenlet (`GreenletExit`: the run's end, fewer users, a quitting
worker) while a request is on the wire does not lose it either: once the request is sent,
`exchange` returns `cancelled` with what was read up to the cut and keeps the exit in `cut`, for
the user to raise again after recording it. Killed before the request was sent whole, nothing
reached the server: nothing is recorded and the exit goes straight on.

A client that hangs up on purpose (`--cancel`, swarm/load/cancel.py) is one `exchange` with a
`CutPoint`: after a time, a gevent timer raises `ClientHangUp` in the user's greenlet (wherever it
waits: for the status, for the next read); after N tokens, the stream's feed raises it once the
tally counts them. Either way the request ends `cancelled_by_client`, timed at the hang-up, and the
response is released unfinished, which closes the socket: the server sees its client go (vLLM
aborts the request and frees its KV blocks). A request without a cut point pays one `is None` test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gevent
import orjson
from gevent import GreenletExit
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from swarm.client.clock import BLOCK_SIZE, Clock
from swarm.client.dialects import error_message
from swarm.client.on_time import SLOTS
from swarm.client.shared_pool import carried, new_socket
from swarm.client.sse import DONE_BYTES, SSEParser
from swarm.client.tally import StreamTally
from swarm.core.errors import BadChunk, ClientHangUp, RequestFailure
from swarm.core.records import Outcome, RequestRecord

PAUSE_BYTES = 256 * 1024
"""Body bytes read between two turns of the event loop. A stream that is always readable (a server
faster than the client parses) never waits in recv(), so without a pause nothing else runs: not the
--request-deadline timer, not the stop, not the other users (measured: an endless stream ran past
a 5 s deadline for as long as it was watched). 256 KiB is ~1,000 chunks; a 64-token answer is 16 KiB.
At each pause the tally also drops the ITL gaps past its cap (swarm/client/tally.py ITL_KEEP)."""
DRAIN_S = 1.0  # after [DONE]: wait at most this long for the end of the HTTP body (keep-alive)
ERROR_BODY_MAX = 64 * 1024  # bytes of an HTTP error body read for its message
INF = float("inf")
HEAD_MAX = 64 * 1024  # bytes read by hand while looking for the end of the headers
MALFORMED = (AttributeError, TypeError, KeyError, IndexError, ValueError)  # JSON of another shape
CANCELLED_MESSAGE = "cut by the swarm's stop while in flight ({phase})"
# What cuts a request the way a stop does: the greenlet killed (`GreenletExit`), or a Ctrl-C that
# Python delivered as `KeyboardInterrupt` in this greenlet's frame (it runs a signal's handler in
# whatever frame is current; gevent then hands the interrupt to the main greenlet, which stops the
# run). Either way the request is one `cancelled` record and the user raises the exit again, also
# under a plain `locust -f` (tests/integration/test_stop_modes.py).
STOPS = (GreenletExit, KeyboardInterrupt)
HANG_UP_MESSAGE = "the client hung up {when} (--cancel)"


def failure(
    exc: BaseException, phase: str, timeout: float, deadline_s: float | None = None, *, answered: bool = False
) -> tuple[Outcome, str]:
    """How a request that failed with `exc` is recorded: (outcome, message).

    `phase`: "connecting", "sending", "waiting for the status", "streaming", "tally" (the finished
    stream's usage of another shape) or "internal" (a bug of ours: connect_error, or bad_chunk when
    the server had `answered` with a status line; still one record). `timeout`: the idle
    --request-timeout, `deadline_s`: the whole-request --request-deadline.
    """
    if isinstance(exc, RequestFailure):  # BadChunk, EventTooLarge: the message says what came
        return exc.outcome, str(exc)[:300]
    if isinstance(exc, gevent.Timeout):  # the whole-request deadline (an idle timeout is TimeoutError)
        return Outcome.TIMEOUT, f"not finished after {deadline_s or 0:g} s (--request-deadline)"
    if phase == "internal":
        return (
            Outcome.BAD_CHUNK if answered else Outcome.CONNECT_ERROR,
            f"internal {type(exc).__name__}: {exc}",
        )
    if isinstance(exc, MALFORMED) and phase == "tally":
        return Outcome.BAD_CHUNK, f"malformed chunk ({type(exc).__name__}: {exc})"
    if isinstance(exc, TimeoutError):
        if phase == "connecting":
            return Outcome.CONNECT_ERROR, f"connect timeout after {timeout:g} s"
        return Outcome.TIMEOUT, f"no byte for {timeout:g} s ({phase})"
    if phase == "streaming":  # reset / broken chunked framing mid-stream
        return Outcome.TRUNCATED, f"stream broken: {type(exc).__name__}: {exc}"
    return Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"


class _Stale(Exception):
    """A kept-alive connection the server had closed: not one byte of an answer came back."""


class _Response(HTTPSocketPoolResponse):
    """geventhttpclient's response parser; the body is read by `_BodyReads`."""


class _BodyReads:
    """The response body as it comes off the socket, one `bytes` per read, with its time."""

    __slots__ = ("clock", "eof", "n_bytes", "resp", "sock", "t")

    def __init__(self, resp: _Response, sock: Any, t: float, clock: Clock | None) -> None:
        self.resp = resp
        self.sock = sock
        self.clock = clock  # None: plain recv() and perf_counter()
        self.t = t  # the time of the read that returned the latest bytes
        self.n_bytes = 0
        self.eof = False  # the server closed the connection before the body ended

    def __iter__(self) -> Any:
        resp = self.resp
        buf = resp._body_buffer
        if buf:  # body bytes that came with the headers
            out = bytes(buf)
            del buf[:]
            self.n_bytes += len(out)
            yield out
        feed = resp.feed
        clock = self.clock
        sock = self.sock
        while not resp.message_complete:
            if clock is not None:
                data, self.t = clock.recv(sock)
            else:
                data = sock.recv(BLOCK_SIZE)
                self.t = time.perf_counter()
            if not data:
                self.eof = True
                return
            feed(data)
            if buf:
                out = bytes(buf)
                del buf[:]
                self.n_bytes += len(out)
                yield out


class Transport:
    """One user's requests to one endpoint, over the process's connection pool for its origin.

    `head`: the request line and headers up to "X-Request-Id: " (the request's id, its
    Content-Length and the body follow per request, swarm/live/user.py); `common_headers`: Host,
    User-Agent, Authorization lines.
    """

    def __init__(
        self, pool: Any, head: bytes, common_headers: str, timeout: float, deadline_s: float | None
    ) -> None:
        self.pool = pool
        self.head = head
        self.common_headers = common_headers
        self.timeout = timeout  # seconds without a byte (--request-timeout)
        self.deadline_s = deadline_s  # seconds for a whole request (--request-deadline); None: none
        self._deadline: gevent.Timeout | None = None  # the request in flight's (one timer per request)
        self.cut: BaseException | None = None  # the stop that cancelled the last exchange, to raise again
        self._used = carried(pool)  # the pool's sockets that carried a request already (by any user)
        self._cut_tokens: int | None = None  # the request in flight's --cancel point in tokens, if any
        self._hang_up: ClientHangUp | None = None  # ... and what its hang-up raises

    def get(self, path: str) -> tuple[int, bytes]:
        """A plain GET on the pool (no Locust event): status and body. Raises on failure."""
        sock = self.pool.get_socket()
        try:
            sock.settimeout(self.timeout)
            sock.sendall(
                f"GET {path} HTTP/1.1\r\n{self.common_headers}Accept: application/json\r\n\r\n".encode(
                    "latin-1"
                )
            )
        except BaseException:
            self.pool.release_socket(sock)
            raise
        resp = _Response(sock, self.pool, block_size=BLOCK_SIZE, method="GET")
        try:
            return resp.status_code, resp.read()
        finally:
            resp.release()

    def exchange(
        self, data: bytes, tally: StreamTally, record: RequestRecord, cut: CutPoint | None = None
    ) -> tuple[Outcome, str | None, float, int]:
        """Socket I/O of one request under the whole-request deadline: (outcome, error, end time,
        body bytes). The idle timeout alone never ends a server that trickles a byte a second.
        `cut`: where the client hangs up on purpose (--cancel; None: it does not)."""
        if cut is not None:  # (the one test a request without a --cancel cut point pays)
            return self._exchange_cut(data, tally, record, cut)
        if self.deadline_s is None:
            return self._exchange_io(data, tally, record)
        deadline = self._deadline = gevent.Timeout(self.deadline_s)  # (a fired Timeout cannot restart)
        deadline.start()
        try:
            return self._exchange_io(data, tally, record)
        except gevent.Timeout as t:
            if t is not deadline:
                raise
            return (*failure(t, "", self.timeout, self.deadline_s), time.perf_counter(), 0)
        finally:
            deadline.close()

    def _exchange_cut(
        self, data: bytes, tally: StreamTally, record: RequestRecord, cut: CutPoint
    ) -> tuple[Outcome, str | None, float, int]:
        """`exchange` of a request whose client hangs up at `cut` (if it has not ended by then)."""
        hang_up = ClientHangUp(HANG_UP_MESSAGE.format(when=cut.when))
        self._cut_tokens = cut.after_tokens
        self._hang_up = hang_up
        timer = gevent.Timeout(cut.after_s, hang_up) if cut.after_s is not None else None
        if timer is not None:
            timer.start()
        try:
            return self.exchange(data, tally, record)
        except ClientHangUp as e:  # (before the stream: waiting for the status line)
            if e is not hang_up:
                raise
            return e.outcome, str(e), time.perf_counter(), 0
        finally:
            self._cut_tokens = None
            if timer is not None:
                timer.close()

    def _exchange_io(
        self, data: bytes, tally: StreamTally, record: RequestRecord
    ) -> tuple[Outcome, str | None, float, int]:
        pool = self.pool
        timeout = self.timeout
        perf = time.perf_counter
        t0 = perf()  # (a read cannot arrive before this)
        for attempt in (1, 2):
            try:  # (a retry after a stale socket: a new connection, not another idle one)
                sock = pool.get_socket() if attempt == 1 else new_socket(pool)
            except Exception as e:
                return (*failure(e, "connecting", timeout), perf(), 0)
            try:
                sock.settimeout(timeout)
                sock.sendall(data)
            except BaseException as e:
                pool.release_socket(sock)
                if isinstance(e, Exception):
                    return (*failure(e, "sending", timeout), perf(), 0)
                raise
            reused = sock in self._used
            self._used.add(sock)
            try:
                return self._answer(sock, tally, record, t0, stale_ok=reused and attempt == 1)
            except _Stale:  # the server had closed it after its last answer: once more, on a new one
                continue
            except STOPS as e:  # sent, then stopped: one `cancelled` record (the user raises `cut` again)
                self.cut = e
                return Outcome.CANCELLED, CANCELLED_MESSAGE.format(phase="waiting for the status"), perf(), 0
        raise AssertionError("unreachable: the second attempt never raises _Stale")

    def _answer(
        self, sock: Any, tally: StreamTally, record: RequestRecord, t0: float, stale_ok: bool = False
    ) -> tuple[Outcome, str | None, float, int]:
        """The response to a request sent on `sock`: status, headers, then the stream or the error.

        `stale_ok`: `sock` was kept alive from an earlier request; if it turns out closed before
        one byte of an answer, raise `_Stale` (the request never reached a server that reads it:
        llama-server closes every streamed connection though its headers say keep-alive)."""
        pool = self.pool
        timeout = self.timeout
        perf = time.perf_counter
        clock = Clock(t0) if Clock.enable(sock) else None
        head, t_headers = b"", 0.0
        if clock is not None:  # the first bytes, read here for their receive time
            try:
                head, t_headers = self._read_head(sock, clock)
            except BaseException as e:
                if not isinstance(e, OSError):  # (gevent.Timeout, GreenletExit: the socket is not reusable)
                    pool.release_socket(sock)
                    raise
                if isinstance(e, TimeoutError):
                    pool.release_socket(sock)
                    return (*failure(e, "waiting for the status", timeout), perf(), 0)
                head = b""  # reset before any byte: geventhttpclient reads again and says so
            if not head and stale_ok:
                pool.release_socket(sock)
                raise _Stale
        try:  # status line and headers (the response releases the socket itself on failure)
            resp = _Response(sock, pool, block_size=BLOCK_SIZE, method="POST", pre_buffered=head)
        except (HTTPParseError, OSError) as e:  # (TimeoutError is an OSError)
            if stale_ok and not head and isinstance(e, (HTTPConnectionClosed, ConnectionResetError)):
                raise _Stale from None
            return (*failure(e, "waiting for the status", timeout), perf(), 0)
        if b"\r\n\r\n" not in head or head[9:10] == b"1":  # geventhttpclient read the rest (or a 1xx)
            t_headers = perf()
        try:
            status = resp.status_code
            record.http_status = status
            rid = resp.get("x-request-id")
            if rid:
                record.request_id = rid if isinstance(rid, str) else rid[0]
            if status != 200:
                body, t_end = self._error_body(resp, sock)
                return Outcome.HTTP_ERROR, f"{status} {error_message(json_or_text(body))}", t_end, len(body)
            return self._stream(resp, sock, tally, t_headers, clock)
        finally:
            resp.release()

    @staticmethod
    def _read_head(sock: Any, clock: Clock) -> tuple[bytes, float]:
        """Read until the end of the headers (or EOF, or HEAD_MAX bytes): (bytes, time of the last read).

        The bytes go to geventhttpclient as `pre_buffered`; body bytes that came with them carry
        the last read's time."""
        head, t = b"", 0.0
        while b"\r\n\r\n" not in head and len(head) < HEAD_MAX:
            data, t = clock.recv(sock)
            # an open-loop request is due (swarm/client/on_time.py; as in `_stream`)
            if SLOTS.due < INF and time.perf_counter() >= SLOTS.due:
                SLOTS.send_due()
            if not data:
                break
            head += data
        return head, t

    def _stream(
        self, resp: _Response, sock: Any, tally: StreamTally, t_headers: float, clock: Clock | None
    ) -> tuple[Outcome, str | None, float, int]:
        reads = _BodyReads(resp, sock, t_headers, clock)
        parse = SSEParser().feed
        loads = orjson.loads
        feed = tally.feed
        if self._cut_tokens is not None:  # --cancel after N tokens: this request's feed hangs up
            feed = _hanging_up(tally, self._cut_tokens, self._hang_up)
        pause_at = PAUSE_BYTES
        slots = SLOTS
        perf = time.perf_counter
        try:
            for buf in reads:
                t = reads.t
                # an open-loop request is due: it goes before this chunk's parse. (Now, not `t`: the
                # kernel stamped a read that waited behind others with when it came, long before.)
                if slots.due < INF and perf() >= slots.due:  # (nobody waits: no clock read)
                    slots.send_due()
                if reads.n_bytes >= pause_at:  # a long stream: bound what it keeps, let the loop run
                    tally.trim()
                    gevent.sleep(0)  # (see PAUSE_BYTES: the deadline's and the stop's turn)
                    pause_at = reads.n_bytes + PAUSE_BYTES
                for payload in parse(buf):  # bytes: orjson reads them as is (and checks the UTF-8)
                    if payload == DONE_BYTES:
                        if not resp.message_complete:
                            self._drain(resp, sock)
                        if tally.error is not None:
                            return Outcome.STREAM_ERROR, tally.error, t, reads.n_bytes
                        return Outcome.OK, None, t, reads.n_bytes
                    try:
                        obj = loads(payload)
                        fed = feed(obj, t)
                    except orjson.JSONDecodeError:
                        raise BadChunk(f"not JSON: {payload[:120].decode('utf-8', 'replace')!r}") from None
                    except MALFORMED as e:  # JSON of another shape
                        raise BadChunk(
                            f"malformed chunk ({type(e).__name__}: {e}): {payload[:120]!r}"
                        ) from None
                    if not fed:
                        return Outcome.STREAM_ERROR, tally.error, t, reads.n_bytes
        except gevent.Timeout as t:
            if t is not self._deadline:
                raise
            return (
                *failure(t, "streaming", self.timeout, self.deadline_s),
                time.perf_counter(),
                reads.n_bytes,
            )
        except STOPS as e:  # stopped mid-stream: what came so far is in the tally
            self.cut = e
            return (
                Outcome.CANCELLED,
                CANCELLED_MESSAGE.format(phase="streaming"),
                time.perf_counter(),
                reads.n_bytes,
            )
        except ClientHangUp as e:  # --cancel: the client hangs up here, the socket closes unread
            return (
                e.outcome,
                str(e),
                reads.t if self._cut_tokens is not None else time.perf_counter(),
                reads.n_bytes,
            )
        except RequestFailure as e:  # BadChunk, EventTooLarge: timed at the read that carried it
            return (*failure(e, "streaming", self.timeout), reads.t, reads.n_bytes)
        except (HTTPParseError, OSError) as e:  # a timeout; reset / broken chunked framing mid-stream
            return (*failure(e, "streaming", self.timeout), time.perf_counter(), reads.n_bytes)
        how = "connection closed" if reads.eof else "body ended"
        ctype = resp.get("content-type") or ""
        if "event-stream" not in str(ctype):
            how += f" (Content-Type {ctype or 'missing'}, not an event stream)"
        return Outcome.TRUNCATED, f"{how} without [DONE]", reads.t, reads.n_bytes

    def _drain(self, resp: _Response, sock: Any) -> None:
        """After [DONE], read the end of the HTTP body so the connection can be reused."""
        try:
            sock.settimeout(min(DRAIN_S, self.timeout))
            while not resp.message_complete:
                data = sock.recv(BLOCK_SIZE)
                if not data:
                    return
                resp.feed(data)
        except (Exception, gevent.Timeout):  # [DONE] is in: the request is complete either way
            return
        except STOPS as e:  # stopped after [DONE]: still ok; the user raises the exit after recording
            self.cut = e

    def _error_body(self, resp: _Response, sock: Any) -> tuple[bytes, float]:
        body = bytearray(resp._body_buffer)
        del resp._body_buffer[:]
        try:
            while not resp.message_complete and len(body) < ERROR_BODY_MAX:
                data = sock.recv(BLOCK_SIZE)
                if not data:
                    break
                resp.feed(data)
                body += resp._body_buffer
                del resp._body_buffer[:]
        except (Exception, gevent.Timeout):  # the status is in: an http_error with what came
            pass
        return bytes(body), time.perf_counter()


@dataclass(frozen=True, slots=True)
class CutPoint:
    """Where a client hangs up on purpose (--cancel): after a time, or after a number of tokens."""

    after_s: float | None = None
    after_tokens: int | None = None
    when: str = ""  # as the record's message says it


def _hanging_up(tally: StreamTally, after_tokens: int, hang_up: ClientHangUp | None) -> Any:
    """`tally.feed` that raises `hang_up` once the tally has counted `after_tokens` tokens."""
    feed = tally.feed

    def feed_then_check(obj: Any, t: float) -> bool:
        fed = feed(obj, t)
        if fed and tally.tokens_so_far >= after_tokens:
            raise hang_up or ClientHangUp(HANG_UP_MESSAGE.format(when=f"after {after_tokens} tokens"))
        return fed

    return feed_then_check


def json_or_text(body: bytes) -> Any:
    """An error body as JSON, else its first 300 characters of text."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()[:300] or "(empty body)"
