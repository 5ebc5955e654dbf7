"""Property-based: random SSE byte streams through the user's whole read path never raise out of
the user, and every stream gets exactly one outcome.

The driver is `LLMUser.send` itself, in this process: a real Locust environment and user, whose
connection pool hands out one end of a real socket pair; a greenlet plays a hypothesis-generated
HTTP response into the other end, split into arbitrary TCP writes, then hangs up. So the bytes go
through geventhttpclient's parser, the de-chunking, the SSE parser, JSON decoding and the
dialect's chunk reading exactly as off a network socket (swarm/client/transport.py `_stream`).

Two properties:
- arbitrary bytes as the event stream (and as a whole raw response): one record, one Locust
  request event, an outcome, never an `internal` error (a bug of ours), `ok` only with a
  `[DONE]` in the bytes;
- streams built from events whose outcome is known (tokens, role/usage chunks, comments, error
  event, malformed JSON, invalid UTF-8, a non-chunk JSON value, `[DONE]` or a cut), with CR, LF
  or CRLF line ends: the outcome is exactly the one the first decisive event calls for, and an
  `ok` stream counts its tokens exactly.
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Any

import gevent
import locust  # noqa: F401  (gevent's monkey-patching first, as in any Locust process)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from locust.env import Environment

from swarm.client.dialects import get_dialect
from swarm.client.discovery import ServedModel
from swarm.core.events import llm_request
from swarm.core.records import Outcome
from swarm.live.state import swarm_state
from swarm.live.user import LLMUser
from swarm.load.request import LLMRequest

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nx-request-id: fuzz-1\r\n"


class _OnePool:
    """A connection pool with one socket: the client end of a socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_socket(self) -> socket.socket:
        return self.sock

    def release_socket(self, sock: socket.socket) -> None:
        sock.close()

    return_socket = release_socket


class FuzzUser(LLMUser):
    host = "http://127.0.0.1:1"
    workload = "short_qa"


@pytest.fixture(scope="module")
def harness():
    opts = argparse.Namespace(model="m", dialect="vllm", request_timeout=2.0, request_deadline=5.0)
    env = Environment(user_classes=[FuzzUser], host=FuzzUser.host, parsed_options=opts)
    user = FuzzUser(env)
    swarm_state(env).served_at["http://127.0.0.1:1"] = ServedModel("m", get_dialect("vllm"), True)
    fired: dict[str, list] = {"records": [], "requests": []}

    def on_record(record, **_):
        fired["records"].append(record)

    def on_request(**kw):
        fired["requests"].append(kw)

    llm_request.add_listener(on_record)
    env.events.request.add_listener(on_request)
    req = LLMRequest(workload="short_qa", messages=[{"role": "user", "content": "hi"}], max_tokens=16)
    yield user, req, fired  # (send() never pauses: the closed loop's backoff is llm_request's)
    llm_request.remove_listener(on_record)


def play(harness, response: bytes, cuts: list[int]) -> Any:
    """Send one request whose answer is `response`, written in pieces at `cuts`; the record."""
    user, req, fired = harness
    fired["records"].clear()
    fired["requests"].clear()
    client, server = socket.socketpair()
    user.endpoints[0].transport.pool = _OnePool(client)

    def serve() -> None:
        try:
            start = 0
            for cut in [*sorted({c % (len(response) + 1) for c in cuts}), len(response)]:
                if cut > start:
                    server.sendall(response[start:cut])
                    gevent.sleep(0)
                    start = cut
        except OSError:
            pass  # the user hung up first (e.g. on a bad chunk): that is its right
        finally:
            server.close()

    writer = gevent.spawn(serve)
    record = user.send(req)  # must not raise
    writer.join(timeout=5)
    assert len(fired["records"]) == 1 and fired["records"][0] is record
    assert len(fired["requests"]) == 1
    exc = fired["requests"][0]["exception"]
    assert (exc is None) == (record.outcome is Outcome.OK)
    assert isinstance(record.outcome, Outcome)
    assert record.e2e_s is not None and record.e2e_s >= 0
    if record.outcome is not Outcome.OK:
        assert record.error and not record.error.startswith("internal"), record.error
    return record


def chunked(body: bytes, sizes: list[int]) -> bytes:
    out, i = b"", 0
    for n in [*sizes, len(body)]:
        piece = body[i : i + max(1, n)]
        if piece:
            out += b"%x\r\n%s\r\n" % (len(piece), piece)
        i += len(piece)
        if i >= len(body):
            break
    return out


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(
    body=st.binary(max_size=3000)
    | st.lists(
        st.sampled_from(
            [
                b"data: ",
                b"data:",
                b"[DONE]",
                b"\n",
                b"\r",
                b"\r\n",
                b"\n\n",
                b": c\n",
                b"{",
                b"}",
                b'"choices"',
                b'{"choices":[]}',
                b"\xff",
                b"\xe4\xb8",
                b"event: x\n",
                b"id: 1\n",
                b"x" * 100,
            ]
        ),
        max_size=60,
    ).map(b"".join),
    sizes=st.lists(st.integers(1, 200), max_size=20),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
    framing=st.sampled_from(["chunked", "chunked-unfinished", "until-close"]),
)
def test_random_event_streams_are_classified(harness, body, sizes, cuts, framing):
    if framing == "until-close":
        response = HEAD + b"\r\n" + body  # no length: the body ends when the server hangs up
    else:
        response = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(body, sizes)
        if framing == "chunked":
            response += b"0\r\n\r\n"
    record = play(harness, response, cuts)
    if record.outcome is Outcome.OK:
        assert b"[DONE]" in body
        assert record.http_status == 200


@FUZZ
@given(response=st.binary(max_size=500), cuts=st.lists(st.integers(0, 1000), max_size=5))
def test_random_bytes_instead_of_a_response_are_classified(harness, response, cuts):
    record = play(harness, response, cuts)
    assert record.outcome is not Outcome.OK


# -- streams whose outcome is known ------------------------------------------------------------


def _chunk(delta: dict, ct: int) -> bytes:
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            "usage": {"prompt_tokens": 3, "completion_tokens": ct, "total_tokens": 3 + ct},
        },
        ensure_ascii=False,
    ).encode()


EVENTS = st.one_of(
    st.tuples(st.just("token"), st.text(max_size=5)),
    st.tuples(st.just("comment"), st.binary(max_size=10).filter(lambda b: b"\n" not in b and b"\r" not in b)),
    st.tuples(st.just("error"), st.text(min_size=1, max_size=20)),
    st.tuples(st.just("not_json"), st.sampled_from(["{", '{"choices": [', "nope", "[DONE"])),
    st.tuples(st.just("bad_utf8"), st.sampled_from([b"\xff", b"\xc3(", b"\xe4\xb8"])),
    st.tuples(
        st.just("not_a_chunk"),
        st.sampled_from(
            [
                "5",
                '"x"',
                "[1, 2]",
                "null",
                '{"choices": 3}',
                '{"choices": [7]}',
                '{"choices": [{"delta": []}]}',
                '{"choices": [{"delta": {"content": "x"}}], "usage": 5}',
                '{"choices": [{"delta": {"content": "x"}}], "usage": {"completion_tokens": "x"}}',
            ]
        ),
    ),
    st.tuples(st.just("done"), st.none()),
)
DECISIVE = {
    "error": Outcome.STREAM_ERROR,
    "not_json": Outcome.BAD_CHUNK,
    "bad_utf8": Outcome.BAD_CHUNK,
    "not_a_chunk": Outcome.BAD_CHUNK,
    "done": Outcome.OK,
}


@FUZZ
@given(
    events=st.lists(EVENTS, max_size=12),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    sizes=st.lists(st.integers(1, 64), max_size=30),
    cuts=st.lists(st.integers(0, 5000), max_size=10),
)
def test_streams_with_a_known_outcome(harness, events, eol, sizes, cuts):
    lines = [b"data: " + _chunk({"role": "assistant", "content": ""}, 0)]
    expected, tokens = Outcome.TRUNCATED, 0
    for kind, value in events:
        if kind == "token":
            tokens += 1
            lines.append(b"data: " + _chunk({"content": value}, tokens))
        elif kind == "comment":
            lines.append(b":" + value)
        elif kind == "error":
            # "server: ": a server's message never reads as one of our own internal errors (Hypothesis
            # draws the code's string literals too, "internal" among them)
            message = "server: " + value
            lines.append(b"data: " + json.dumps({"error": {"message": message, "code": 500}}).encode())
        elif kind == "bad_utf8":
            lines.append(b'data: {"choices": [{"delta": {"content": "' + value + b'"}}]}')
        elif kind == "done":
            lines.append(b"data: [DONE]")
        else:
            lines.append(b"data: " + value.encode())
        if kind in DECISIVE:
            expected = DECISIVE[kind]
            break
    body = b"".join(line + eol + eol for line in lines)
    response = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(body, sizes) + b"0\r\n\r\n"
    record = play(harness, response, cuts)
    assert record.outcome is expected, (record.outcome, record.error, events)
    if expected is Outcome.OK:
        assert record.output_tokens == tokens and record.tokens_from_usage
        assert (record.ttft_s is not None) == (tokens > 0)
