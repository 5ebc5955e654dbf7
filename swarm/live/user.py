"""`LLMUser`: a Locust FastHttpUser that sends one streamed completion per task and measures it.

The I/O path is geventhttpclient's socket, read by hand: FastHttpSession fires its `request`
event at the headers (REFERENCE.md §4) and `FastResponse.read(n)` blocks until n bytes are
buffered, so neither sees individual chunks arrive. The user takes a pooled socket from its
FastHttpSession, sends the request itself, reads the socket itself and lets geventhttpclient's
parser take the status and headers and de-chunk the body.

The time of each read is the kernel's receive time of its bytes (Linux `SO_TIMESTAMPNS`: the
arrival of the last packet the read returned), not the moment this process got round to the
`recv()`: a busy worker (other streams' chunks to parse, a report to send) would otherwise add
its own queueing to TTFT and ITL. Where the OS gives no timestamp, it is `time.perf_counter()`
right after the read. See docs/metrics.md, "Clocks".

Per request it builds one `RequestRecord` (swarm/core/records.py) and fires, exactly once each,
`swarm.core.events.llm_request(record=...)` and Locust's `request` event (name = workload,
response_time = E2E in ms, exception = `LLMRequestFailure("outcome: message")` on failure).
Nothing raises out of `send`: every failure becomes one `Outcome`.
"""

from __future__ import annotations

import logging
import random
import re
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.lock
import orjson
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPSocketPoolResponse
from locust import FastHttpUser, constant, events, task

import swarm.live.plugin  # noqa: F401  (registers the swarm's statistics listeners and options)
from swarm.client.dialects import (
    ENDPOINTS,
    BadChunk,
    Dialect,
    StreamTally,
    detect_dialect,
    error_message,
    first_model,
)
from swarm.client.dialects import get_dialect as _get_dialect
from swarm.client.sse import DONE_BYTES, EventTooLarge, SSEParser
from swarm.core.errors import UsageError
from swarm.core.events import llm_request
from swarm.core.records import Outcome, RequestRecord
from swarm.load.workloads import WORKLOADS, Knobs, LLMRequest, Mix, parse_token_range

log = logging.getLogger(__name__)

BLOCK_SIZE = 64 * 1024  # bytes per recv(); one SSE chunk is ~200-300 bytes
DRAIN_S = 1.0  # after [DONE]: wait at most this long for the end of the HTTP body (keep-alive)
ERROR_BODY_MAX = 64 * 1024  # bytes of an HTTP error body read for its message
DISCOVERY_RETRY_S = 5.0
DEFAULT_REQUEST_TIMEOUT_S = 60.0
DEFAULT_REQUEST_DEADLINE_S = 600.0
CONNECT_ERROR_PAUSE_S = 0.25  # after a connect_error: a target that is down is not retried in a busy loop
HEAD_MAX = 64 * 1024  # bytes read by hand while looking for the end of the headers

# Kernel receive timestamps: SO_TIMESTAMPNS (Linux: 35, not exported by Python's socket module);
# the control message carries a struct timespec of CLOCK_REALTIME.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("@ll")
if _TIMESPEC.size != 16:  # a 32-bit time_t: no kernel timestamps
    _SO_TIMESTAMPNS = None
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if _SO_TIMESTAMPNS is not None else 0


class LLMRequestFailure(Exception):
    """The exception handed to Locust for a failed request: `str` and `repr` are "outcome: message"."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(f"{outcome.value}: {message}")
        self.outcome = outcome

    def __repr__(self) -> str:  # Locust's failure table groups and shows failures by repr
        return str(self)


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMOptions:
    """The swarm's Locust options, validated."""

    workload: str | None = None  # None: the user class's default
    model: str | None = None
    api_key: str | None = None
    endpoint: str = "chat"
    dialect: str = "auto"
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    ignore_eos: bool = False
    knobs: Knobs = field(default_factory=Knobs)
    request_deadline: float = DEFAULT_REQUEST_DEADLINE_S  # 0: none

    def __repr__(self) -> str:  # never show the key
        return (
            f"LLMOptions(workload={self.workload!r}, model={self.model!r}, endpoint={self.endpoint!r}, "
            f"dialect={self.dialect!r}, request_timeout={self.request_timeout!r}, "
            f"request_deadline={self.request_deadline!r}, knobs={self.knobs!r})"
        )

    @classmethod
    def from_parsed(cls, opts: Any) -> LLMOptions:
        """From Locust's parsed options (values may be strings when set in the web UI)."""
        if opts is None:
            return cls()

        def get(name: str, default: Any = None) -> Any:
            value = getattr(opts, name, default)
            return default if value is None or value == "" else value

        def number(name: str, kind: type, flag: str, default: Any = None) -> Any:
            value = get(name, default)
            if value is None:
                return None
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise UsageError(f"{flag} must be a number (got {value!r})") from None

        endpoint = get("endpoint", "chat")
        if endpoint not in ENDPOINTS:
            raise UsageError(f"--endpoint must be one of {', '.join(ENDPOINTS)} (got {endpoint!r})")
        dialect = get("dialect", "auto")
        if dialect != "auto":
            _get_dialect(dialect)
        timeout = number("request_timeout", float, "--request-timeout", DEFAULT_REQUEST_TIMEOUT_S)
        if not timeout > 0:
            raise UsageError(f"--request-timeout must be > 0 seconds (got {timeout})")
        deadline = number("request_deadline", float, "--request-deadline", DEFAULT_REQUEST_DEADLINE_S)
        if not deadline >= 0 or deadline == float("inf"):
            raise UsageError(f"--request-deadline must be >= 0 seconds, 0 for none (got {deadline})")
        ignore_eos = str(get("ignore_eos", False)).lower() in ("true", "1", "yes", "on")
        if ignore_eos and dialect != "auto" and not _get_dialect(dialect).ignore_eos:
            raise UsageError(
                f"--ignore-eos is not supported by the {dialect} dialect (vLLM and llama.cpp only)"
            )
        knobs = Knobs(
            thinking_ratio=number("thinking_ratio", float, "--thinking-ratio"),
            max_tokens=number("max_tokens", int, "--max-tokens"),
            rag_passages=number("rag_passages", int, "--rag-passages", 4),
            rag_prefix_share=number("rag_prefix_share", float, "--rag-prefix-share", 0.5),
            rag_tokens=parse_token_range(get("rag_tokens", "2000-3000")),
            prompt_file=get("prompt_file"),
        )
        return cls(
            get("workload"),
            get("model"),
            get("api_key"),
            endpoint,
            dialect,
            timeout,
            ignore_eos,
            knobs,
            deadline,
        )


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    g = parser  # (argument groups do not take Locust's include_in_web_ui / is_secret keywords)
    g.add_argument(
        "--workload",
        default=None,
        include_in_web_ui=True,
        help="workload NAME or a weighted mix NAME:W,NAME:W (e.g. short_qa:3,chat:1); "
        f"names: {', '.join(WORKLOADS)}. Default: the locustfile's",
    )
    g.add_argument(
        "--model",
        default=None,
        include_in_web_ui=True,
        help="model name sent in requests (default: the first model of /v1/models)",
    )
    g.add_argument(
        "--api-key",
        default=None,
        env_var="OPENAI_API_KEY",
        include_in_web_ui=False,
        is_secret=True,
        help="API key sent as 'Authorization: Bearer' (default: $OPENAI_API_KEY); never printed",
    )
    g.add_argument(
        "--endpoint",
        default="chat",
        choices=list(ENDPOINTS),
        include_in_web_ui=True,
        help="chat = /v1/chat/completions, completions = /v1/completions (default chat)",
    )
    g.add_argument(
        "--dialect",
        default="auto",
        choices=["auto", "vllm", "llamacpp", "openai"],
        include_in_web_ui=True,
        help="server dialect (default auto: from /v1/models owned_by)",
    )
    g.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        include_in_web_ui=True,
        help="seconds without a byte from the server before a request ends as 'timeout' (default 60)",
    )
    g.add_argument(
        "--request-deadline",
        type=float,
        default=DEFAULT_REQUEST_DEADLINE_S,
        include_in_web_ui=True,
        help="seconds a whole request may take before it ends as 'timeout', even while bytes trickle "
        f"in (default {DEFAULT_REQUEST_DEADLINE_S:g}; 0: none)",
    )
    g.add_argument(
        "--ignore-eos",
        action="store_true",
        default=False,
        include_in_web_ui=True,
        help="send ignore_eos so every answer runs to max_tokens (vLLM, llama.cpp)",
    )
    g.add_argument(
        "--thinking-ratio",
        type=float,
        default=None,
        include_in_web_ui=True,
        help="share of requests with thinking on (default: mixed 0.2, other workloads 0)",
    )
    g.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        include_in_web_ui=True,
        help="override every workload's max_tokens",
    )
    g.add_argument(
        "--rag-passages",
        type=int,
        default=4,
        include_in_web_ui=True,
        help="rag: retrieved passages per prompt (default 4)",
    )
    g.add_argument(
        "--rag-prefix-share",
        type=float,
        default=0.5,
        include_in_web_ui=True,
        help="rag: share of each prompt that is a prefix common to all prompts, 0-0.9 (default 0.5)",
    )
    g.add_argument(
        "--rag-tokens",
        default="2000-3000",
        include_in_web_ui=True,
        help="rag: prompt size in tokens, N or MIN-MAX (default 2000-3000)",
    )
    g.add_argument(
        "--prompt-file",
        default=None,
        include_in_web_ui=True,
        help="custom: JSONL/CSV file with prompt or messages, optional max_tokens and thinking per row",
    )


def llm_options(environment: Any) -> LLMOptions:
    """The validated options of this environment (cached; rebuilt at each test start)."""
    opts = getattr(environment, "swarm_llm_options", None)
    if opts is None:
        opts = LLMOptions.from_parsed(getattr(environment, "parsed_options", None))
        environment.swarm_llm_options = opts
        environment.swarm_mixes = {}
    return opts


def _mix(environment: Any, default_spec: str) -> Mix:
    opts = llm_options(environment)
    spec = opts.workload or default_spec
    mixes = environment.swarm_mixes
    if spec not in mixes:
        mixes[spec] = Mix.from_spec(spec, opts.knobs)
    return mixes[spec]


def _validate(environment: Any) -> None:
    """Build options and every locustfile user's workload mix: raises UsageError on bad input."""
    environment.swarm_llm_options = None
    llm_options(environment)
    for user_class in getattr(environment, "user_classes", None) or []:
        if isinstance(user_class, type) and issubclass(user_class, LLMUser):
            _mix(environment, user_class.workload)
            host = getattr(environment, "host", None) or user_class.host
            if host and not _URL.match(host):
                raise UsageError(f"--host {host!r} is not a URL: use e.g. http://127.0.0.1:8000")


_URL = re.compile(r"^https?://[^\s/]+")


@events.init.add_listener
def _on_init(environment: Any, **_kwargs: Any) -> None:
    """Bad options: one line on stderr and exit code 2, before anything starts."""
    if getattr(environment, "parsed_options", None) is None:
        return
    try:
        _validate(environment)
    except UsageError as e:
        sys.stderr.write(f"locust: error: {e}\n")
        sys.stderr.flush()
        sys.exit(2)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_kwargs: Any) -> None:
    """Options may have changed in the web UI: validate again; on error stop with exit code 2."""
    environment.swarm_target = None
    try:
        _validate(environment)
    except UsageError as e:
        log.error("%s", e)
        environment.process_exit_code = 2
        runner = getattr(environment, "runner", None)
        if runner is not None:
            gevent.spawn_later(0, runner.quit)


# -- the target: model and dialect ------------------------------------------------------------


@dataclass
class Target:
    model: str | None
    dialect: Dialect
    discovered: bool  # False: /v1/models has not answered (yet); retried later
    retry_at: float = 0.0


_target_lock = gevent.lock.Semaphore()


class _Response(HTTPSocketPoolResponse):
    """geventhttpclient's response parser; the body is read by `_BodyReads`."""


class _Clock:
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
        if _SO_TIMESTAMPNS is None or not _Clock.probe():
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
        if _Clock._arrival is None:
            _Clock._arrival = _probe_arrival_stamps()
        return _Clock._arrival

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
            clock = _Clock(time.perf_counter())
            peer.sendall(b"x")
            time.sleep(gap)
            _data, anc, _flags, _addr = client.recvmsg(BLOCK_SIZE, _ANC_SIZE)
            now = time.perf_counter()
            t = clock.stamp(anc, now)
            return None if t is None else now - t


class _BodyReads:
    """The response body as it comes off the socket, one `bytes` per read, with its time."""

    __slots__ = ("clock", "eof", "n_bytes", "resp", "sock", "t")

    def __init__(self, resp: _Response, sock: Any, t: float, clock: _Clock | None) -> None:
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


class LLMUser(FastHttpUser):
    """Sends streamed chat/completions requests drawn from a workload mix; one record each.

    Subclass it in a locustfile and set `workload` (a NAME or NAME:W,NAME:W spec); the
    `--workload` option overrides it. All other settings are Locust options (see --help).
    """

    abstract = True
    workload: str = "mixed"
    wait_time = constant(0)

    def __init__(self, environment: Any) -> None:
        self.opts = llm_options(environment)
        self.network_timeout = self.opts.request_timeout
        self.connection_timeout = self.opts.request_timeout
        super().__init__(environment)
        _Clock.probe()  # here, at spawn: not inside the first request's timing
        self.mix = _mix(environment, type(self).workload)
        self.rng = random.Random()
        parts = urlsplit(self.host)
        prefix = parts.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[:-3]
        self._prefix = prefix
        base = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/"
        self._pool = self.client.client.clientpool.get_client(base)._connection_pool
        host_header = parts.netloc.rpartition("@")[2]
        if self.opts.api_key:
            auth = f"Authorization: Bearer {self.opts.api_key}\r\n"
        elif self.client.auth_header:  # user:password@ in --host
            auth = f"Authorization: {self.client.auth_header}\r\n"
        else:
            auth = ""
        self._common_headers = f"Host: {host_header}\r\nUser-Agent: llm-swarm\r\n{auth}"
        self._secret = self.opts.api_key or None  # scrubbed from error messages a server echoes
        self._deadline_s = self.opts.request_deadline or None
        self._deadline: gevent.Timeout | None = None  # the request in flight's (one timer per request)
        self._chat = self.opts.endpoint == "chat"
        path = prefix + ENDPOINTS[self.opts.endpoint]
        self._url = f"{parts.scheme}://{host_header}{path}"
        self._head = (
            f"POST {path} HTTP/1.1\r\n{self._common_headers}Accept: text/event-stream\r\n"
            "Content-Type: application/json\r\nContent-Length: "
        ).encode("latin-1")

    @task
    def llm_request(self) -> None:
        schedule = getattr(self.environment, "swarm_arrivals", None)
        if schedule is None:
            if getattr(self.environment.parsed_options, "rate", ""):
                gevent.sleep(0.05)  # open loop, but the master's first stage message is not here yet
                return
            self.send(self.mix.next_request(self.rng))  # closed loop: send as soon as the last answer is in
            return
        # Open loop (swarm/load/arrivals.py): one free user at a time holds the next arrival slot and
        # sleeps until it, so a rate change never finds users parked on old slots; users that
        # queue for the gate while every other user is busy make the measured lateness.
        with self.environment.swarm_arrival_gate:
            slot = schedule.next_slot()
            delay = slot - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
        self.send(self.mix.next_request(self.rng), send_lag_s=max(0.0, time.perf_counter() - slot))

    # -- target discovery ---------------------------------------------------------------------

    def target(self) -> Target:
        """Model and dialect, from the options or (once per process) from /v1/models."""
        env = self.environment
        t = getattr(env, "swarm_target", None)
        if t is not None and (t.discovered or time.monotonic() < t.retry_at):
            return t
        with _target_lock:
            t = getattr(env, "swarm_target", None)
            if t is not None and (t.discovered or time.monotonic() < t.retry_at):
                return t
            t = env.swarm_target = self._discover()
        return t

    def _discover(self) -> Target:
        opts = self.opts
        if opts.model and opts.dialect != "auto":
            return Target(opts.model, _get_dialect(opts.dialect), True)
        try:
            status, body = self._get(self._prefix + "/v1/models")
            if status != 200:
                raise OSError(f"HTTP {status}: {error_message(_json_or_text(body))}")
            models = orjson.loads(body)
        except Exception as e:  # no model list: go on with what the options say
            log.warning(
                "GET /v1/models failed (%s: %s); using --model %s and the %s dialect; retrying in %.0f s",
                type(e).__name__,
                e,
                opts.model or "(none)",
                "openai" if opts.dialect == "auto" else opts.dialect,
                DISCOVERY_RETRY_S,
            )
            dialect = _get_dialect("openai" if opts.dialect == "auto" else opts.dialect)
            return Target(opts.model, dialect, False, time.monotonic() + DISCOVERY_RETRY_S)
        name = opts.dialect if opts.dialect != "auto" else detect_dialect(models)
        model = opts.model or first_model(models)
        if opts.ignore_eos and name == "openai":
            log.warning(
                "--ignore-eos: the target looks like a plain OpenAI server; sending ignore_eos anyway"
            )
        log.info("target: model %s, dialect %s", model, name)
        return Target(model, _get_dialect(name), True)

    def _get(self, path: str) -> tuple[int, bytes]:
        """A plain GET on the user's connection pool (no Locust event): status and body."""
        sock = self._pool.get_socket()
        try:
            sock.settimeout(self.opts.request_timeout)
            sock.sendall(
                f"GET {path} HTTP/1.1\r\n{self._common_headers}Accept: application/json\r\n\r\n".encode(
                    "latin-1"
                )
            )
        except BaseException:
            self._pool.release_socket(sock)
            raise
        resp = _Response(sock, self._pool, block_size=BLOCK_SIZE, method="GET")
        try:
            return resp.status_code, resp.read()
        finally:
            resp.release()

    # -- one request ---------------------------------------------------------------------------

    def send(self, req: LLMRequest, send_lag_s: float | None = None) -> RequestRecord:
        """Send `req`, stream the answer, fire the events; returns the record. Never raises
        (except the greenlet being killed, which records nothing)."""
        env = self.environment
        record = RequestRecord(
            workload=req.workload,
            start_wall_s=time.time(),
            send_lag_s=send_lag_s,
            stage=getattr(env, "swarm_stage", 0),
            warmup=getattr(env, "swarm_warmup", False),
        )
        n_bytes = 0
        t0 = time.perf_counter()
        t_end = t0
        try:
            target = self.target()
            chat = self._chat
            body = target.dialect.body(
                endpoint="chat" if chat else "completions",
                model=target.model,
                messages=req.messages if chat else None,
                prompt=None if chat else req.prompt_text(),
                max_tokens=req.max_tokens,
                thinking=req.thinking,
                ignore_eos=self.opts.ignore_eos,
            )
            data = self._head + str(len(body)).encode() + b"\r\n\r\n" + body
            tally = StreamTally(target.dialect, chat)
            t0 = time.perf_counter()
            record.start_wall_s = time.time()  # (after t0: start_wall_s + ttft_s errs late, never early)
            outcome, error, t_end, n_bytes = self._exchange(data, tally, record)
            try:
                tally.fill(record, t0, t_end)
            except (
                AttributeError,
                TypeError,
                KeyError,
                IndexError,
                ValueError,
            ) as e:  # e.g. usage of another shape
                outcome, error = Outcome.BAD_CHUNK, f"malformed chunk ({type(e).__name__}: {e})"
            if record.request_id is None:
                record.request_id = tally.response_id
        except Exception as e:  # a bug of ours, not the server's: still one record, never a raise
            t_end = time.perf_counter()
            outcome, error = (
                Outcome.CONNECT_ERROR if record.http_status is None else Outcome.BAD_CHUNK,
                f"internal {type(e).__name__}: {e}",
            )
            _log_once(
                type(e).__name__, "swarm.live.user: unexpected error while sending a request", exc_info=True
            )
            record.e2e_s = t_end - t0
        if error and self._secret and self._secret in error:  # a server that echoes the key
            error = error.replace(self._secret, "***")
        record.outcome = outcome
        record.error = error
        if outcome is not Outcome.OK:
            record.tpot_s = None
        self._fire(record, n_bytes)
        if outcome is Outcome.CONNECT_ERROR:
            gevent.sleep(CONNECT_ERROR_PAUSE_S)
        return record

    def _exchange(
        self, data: bytes, tally: StreamTally, record: RequestRecord
    ) -> tuple[Outcome, str | None, float, int]:
        """Socket I/O of one request under the whole-request deadline: (outcome, error, end time,
        body bytes). The idle timeout alone never ends a server that trickles a byte a second."""
        if self._deadline_s is None:
            return self._exchange_io(data, tally, record)
        deadline = self._deadline = gevent.Timeout(self._deadline_s)  # (a fired Timeout cannot restart)
        deadline.start()
        try:
            return self._exchange_io(data, tally, record)
        except gevent.Timeout as t:
            if t is not deadline:
                raise
            return (
                Outcome.TIMEOUT,
                f"not finished after {self.opts.request_deadline:g} s (--request-deadline)",
                time.perf_counter(),
                0,
            )
        finally:
            deadline.close()

    def _exchange_io(
        self, data: bytes, tally: StreamTally, record: RequestRecord
    ) -> tuple[Outcome, str | None, float, int]:
        pool = self._pool
        timeout = self.opts.request_timeout
        perf = time.perf_counter
        t0 = perf()  # (a read cannot arrive before this)
        try:
            sock = pool.get_socket()
        except TimeoutError:
            return Outcome.CONNECT_ERROR, f"connect timeout after {timeout:g} s", perf(), 0
        except Exception as e:
            return Outcome.CONNECT_ERROR, f"{type(e).__name__}: {e}", perf(), 0
        try:
            sock.settimeout(timeout)
            sock.sendall(data)
        except BaseException as e:
            pool.release_socket(sock)
            if isinstance(e, TimeoutError):
                return Outcome.TIMEOUT, f"no byte for {timeout:g} s (sending)", perf(), 0
            if isinstance(e, Exception):
                return Outcome.CONNECT_ERROR, f"{type(e).__name__}: {e}", perf(), 0
            raise
        clock = _Clock(t0) if _Clock.enable(sock) else None
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
                    return Outcome.TIMEOUT, f"no byte for {timeout:g} s (waiting for the status)", perf(), 0
                head = b""  # reset before any byte: geventhttpclient reads again and says so
        try:  # status line and headers (the response releases the socket itself on failure)
            resp = _Response(sock, pool, block_size=BLOCK_SIZE, method="POST", pre_buffered=head)
        except TimeoutError:
            return Outcome.TIMEOUT, f"no byte for {timeout:g} s (waiting for the status)", perf(), 0
        except (HTTPParseError, OSError) as e:
            return Outcome.CONNECT_ERROR, f"{type(e).__name__}: {e}", perf(), 0
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
                return Outcome.HTTP_ERROR, f"{status} {error_message(_json_or_text(body))}", t_end, len(body)
            return self._stream(resp, sock, tally, t_headers, clock)
        finally:
            resp.release()

    @staticmethod
    def _read_head(sock: Any, clock: _Clock) -> tuple[bytes, float]:
        """Read until the end of the headers (or EOF, or HEAD_MAX bytes): (bytes, time of the last read).

        The bytes go to geventhttpclient as `pre_buffered`; body bytes that came with them carry
        the last read's time."""
        head, t = b"", 0.0
        while b"\r\n\r\n" not in head and len(head) < HEAD_MAX:
            data, t = clock.recv(sock)
            if not data:
                break
            head += data
        return head, t

    def _stream(
        self, resp: _Response, sock: Any, tally: StreamTally, t_headers: float, clock: _Clock | None
    ) -> tuple[Outcome, str | None, float, int]:
        reads = _BodyReads(resp, sock, t_headers, clock)
        parse = SSEParser().feed
        loads = orjson.loads
        feed = tally.feed
        try:
            for buf in reads:
                t = reads.t
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
                    except (
                        AttributeError,
                        TypeError,
                        KeyError,
                        IndexError,
                        ValueError,
                    ) as e:  # JSON of another shape
                        raise BadChunk(
                            f"malformed chunk ({type(e).__name__}: {e}): {payload[:120]!r}"
                        ) from None
                    if not fed:
                        return Outcome.STREAM_ERROR, tally.error, t, reads.n_bytes
        except TimeoutError:
            return (
                Outcome.TIMEOUT,
                f"no byte for {self.opts.request_timeout:g} s (streaming)",
                time.perf_counter(),
                reads.n_bytes,
            )
        except gevent.Timeout as t:
            if t is not self._deadline:
                raise
            return (
                Outcome.TIMEOUT,
                f"not finished after {self.opts.request_deadline:g} s (--request-deadline)",
                time.perf_counter(),
                reads.n_bytes,
            )
        except (BadChunk, EventTooLarge) as e:
            return Outcome.BAD_CHUNK, str(e)[:300], reads.t, reads.n_bytes
        except (HTTPParseError, OSError) as e:  # reset / broken chunked framing mid-stream
            return (
                Outcome.TRUNCATED,
                f"stream broken: {type(e).__name__}: {e}",
                time.perf_counter(),
                reads.n_bytes,
            )
        how = "connection closed" if reads.eof else "body ended"
        ctype = resp.get("content-type") or ""
        if "event-stream" not in str(ctype):
            how += f" (Content-Type {ctype or 'missing'}, not an event stream)"
        return Outcome.TRUNCATED, f"{how} without [DONE]", reads.t, reads.n_bytes

    def _drain(self, resp: _Response, sock: Any) -> None:
        """After [DONE], read the end of the HTTP body so the connection can be reused."""
        try:
            sock.settimeout(min(DRAIN_S, self.opts.request_timeout))
            while not resp.message_complete:
                data = sock.recv(BLOCK_SIZE)
                if not data:
                    return
                resp.feed(data)
        except (Exception, gevent.Timeout):  # [DONE] is in: the request is complete either way
            return

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

    def _fire(self, record: RequestRecord, n_bytes: int) -> None:
        e2e_ms = (record.e2e_s or 0.0) * 1000.0
        exc = None if record.outcome is Outcome.OK else LLMRequestFailure(record.outcome, record.error or "")
        llm_request.fire(record=record)
        self.environment.events.request.fire(
            request_type="POST",
            name=record.workload,
            response_time=e2e_ms,
            response_length=n_bytes,
            exception=exc,
            context={},
            url=self._url,
            start_time=record.start_wall_s,
            response=None,
        )


def _json_or_text(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()[:300] or "(empty body)"


_logged: set[str] = set()


def _log_once(key: str, msg: str, **kwargs: Any) -> None:
    if key not in _logged:
        _logged.add(key)
        log.error(msg, **kwargs)


__all__ = ["LLMOptions", "LLMRequestFailure", "LLMUser", "Target", "llm_options"]
