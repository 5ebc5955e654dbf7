"""LLMUser on the wire: a scripted TCP server (a thread here) answers real Locust (a process).

Covers what the simulator does not: bytes written a few at a time (chunk-size lines and UTF-8
characters split across TCP segments), llama.cpp's dialect, a JSON body where a stream was
expected, invalid UTF-8, and a server that hangs up before the status line.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from tests.helpers.locust_run import run_locust

pytestmark = [pytest.mark.serial, pytest.mark.integration]


def sse(*objs: object) -> bytes:
    return b"".join(b"data: " + (o if isinstance(o, bytes) else json.dumps(o, ensure_ascii=False).encode()) + b"\n\n"
                    for o in objs) + b"data: [DONE]\n\n"  # fmt: skip


def chunk(delta: dict, ct: int | None = None, finish: str | None = None, **extra: object) -> dict:
    c: dict = {"id": "chatcmpl-x", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}  # fmt: skip
    if ct is not None:
        c["usage"] = {"prompt_tokens": 7, "completion_tokens": ct, "total_tokens": 7 + ct}
    return c


VLLM_STREAM = sse(
    chunk({"role": "assistant", "content": ""}, 0),
    chunk({"content": "中"}, 1),
    chunk({"content": ""}, 2),
    chunk({"content": "文😀"}, 3, finish="stop"),
    {
        "id": "chatcmpl-x",
        "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    },
)
LLAMA_STREAM = sse(
    chunk({"role": "assistant", "content": None}),
    chunk({"reasoning_content": "想"}),
    chunk({"reasoning_content": "一想"}),
    chunk({"content": "好"}),
    chunk(
        {}, finish="stop", timings={"prompt_n": 5, "cache_n": 2, "predicted_n": 4}
    ),  # EOS counted, not sent,
)
SCENARIOS: dict[str, dict] = {
    # name: (owned_by, status line + headers, body, how to write it) and the expected record
    "split-writes": {"owner": "vllm", "body": VLLM_STREAM, "piece": 3,
                     "want": {"outcome": "ok", "output_tokens": 3, "prompt_tokens": 7, "tokens_from_usage": True,
                              "finish_reason": "stop", "request_id": "chatcmpl-x"}},
    "llamacpp": {"owner": "llamacpp", "body": LLAMA_STREAM, "piece": 0,
                 "want": {"outcome": "ok", "output_tokens": 4, "prompt_tokens": 7, "reasoning_tokens": 2,
                          "tokens_from_usage": True}},
    "json-body": {"owner": "vllm", "body": b'{"choices": []}', "ctype": "application/json", "piece": 0,
                  "want": {"outcome": "truncated", "http_status": 200}},
    "bad-utf8": {"owner": "vllm", "body": b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n', "piece": 0,
                 "want": {"outcome": "bad_chunk"}},
    "http-400": {"owner": "vllm", "status": "400 Bad Request", "ctype": "application/json", "piece": 0,
                 "body": b'{"error": {"message": "max_tokens is too large", "type": "BadRequestError", "code": 400}}',
                 "want": {"outcome": "http_error", "http_status": 400, "error": "400 max_tokens is too large"}},
    "hang-up": {"owner": "vllm", "hang_up": True, "want": {"outcome": "connect_error", "http_status": None}},
    "silent": {"owner": "vllm", "silent": True, "want": {"outcome": "timeout", "http_status": None}},
}  # fmt: skip


class _Handler(socketserver.BaseRequestHandler):
    scenario: ClassVar[dict] = {}

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(rest) < length:
                rest += sock.recv(65536)
            buf = rest[length:]
            if head.startswith(b"GET /v1/models"):
                body = json.dumps({"data": [{"id": "m", "owned_by": self.scenario["owner"]}]}).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))  # fmt: skip
                continue
            sc = self.scenario
            if sc.get("hang_up"):
                return
            if sc.get("silent"):
                time.sleep(1.0)
                return
            status = sc.get("status", "200 OK")
            ctype = sc.get("ctype", "text/event-stream")
            body = sc["body"]
            wire = b"".join(
                b"%x\r\n%s\r\n" % (len(p), p) for p in (body[i : i + 50] for i in range(0, len(body), 50))
            )
            wire = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nx-request-id: chatcmpl-x\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n").encode() + wire + b"0\r\n\r\n"  # fmt: skip
            piece = sc["piece"]
            if piece:  # a few bytes per TCP segment: splits chunk-size lines and UTF-8 characters
                for i in range(0, len(wire), piece):
                    sock.sendall(wire[i : i + piece])
                    time.sleep(0.0002)
            else:
                sock.sendall(wire)


@contextmanager
def scripted_server(scenario: dict) -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"scenario": scenario})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scripted_server(tmp_path: Path, name: str) -> None:
    scenario = SCENARIOS[name]
    # 5 s, not 1 s: Locust ends a run a little early (~130 ms with 2.47), and on a busy machine a 1 s
    # run may end before its first request does. What is checked is what got recorded, not how much.
    with scripted_server(scenario) as url:
        proc, records, counts = run_locust(tmp_path, url, "--request-timeout", "0.3", users=1, run_time="5s")
    assert records, proc.stdout + proc.stderr
    assert counts["requests"] == len(records)
    for r in records:
        for k, v in scenario["want"].items():
            if k == "error":
                assert r["error"].startswith(v), r
            else:
                assert r[k] == v, (k, r)
    if name == "split-writes":
        r = records[0]
        assert 0 < r["ttft_s"] <= r["ttfa_s"] <= r["e2e_s"] and len(r["itl_s"]) == 2
    if name == "json-body":
        assert "not an event stream" in records[0]["error"]
