"""Small hostile HTTP servers for the fault tests: real sockets on 127.0.0.1, one process each.

`python tests/helpers/fault_servers.py MODE PORT` serves `GET /health`, `GET /v1/models` (a vLLM model
list) and answers every other request (the completions) as MODE says:

- `ok`: a short, valid vLLM stream (the reference the others are compared with);
- `recording`: `ok`'s answers, and `POST /tokenize` and `/detokenize` as the simulator's vLLM face
  answers them (swarm/sim/protocol.py) and `GET /metrics` (one vLLM gauge), so every request kind of a
  run reaches it (`ok` stays without them: its run is test_faults' memory reference);
- `huge_event`: HTTP 200, a role chunk, then one `data:` line of 50 MB that never ends;
- `huge_stream`: HTTP 200, a valid stream of 50 MB (4 KB of text per chunk), then `[DONE]`;
- `huge_error`: HTTP 500 with a 50 MB JSON body;
- `slowloris`: a valid response written one byte a second, status line included;
- `endless`: HTTP 200 and a valid vLLM stream (one token a chunk, running usage) that never ends,
  written as fast as the client reads it;
- `echo_auth`: HTTP 401 whose error message repeats the request's Authorization header;
- `echo_key_mangled`: HTTP 500 whose error message repeats the bearer key upper-cased and its
  first 10 characters (a scrub that looks for the key verbatim misses both);
- `escapes`: terminal escape sequences everywhere a target's words can go: an HTTP 500 error
  message, and a /metrics body that is not Prometheus text;
- `metrics_*`: `ok`'s answers and a hostile vLLM `GET /metrics` (issue 41), its counters the
  completions answered so far (`metrics_text`): `metrics_inf` a TTFT histogram whose `+Inf` bucket
  and `_count` read `+Inf`; `metrics_mixed` vLLM's and SGLang's names in one scrape;
  `metrics_negative` the finished-requests counter at -289 and the running gauge at -3;
  `metrics_reset` the counters from 10^9 up, then from 0 right after the second scrape (a restart);
  `metrics_huge` a valid scrape padded with comments past swarm's 16 MiB cap;
  `metrics_garbage` the running gauge `NaN`, and every other scrape (the first one too) a line that
  is no Prometheus text.

Each completion request (any other GET is a 404, not counted: a run's provenance asks
`/version` and the like) gets an `x-request-id` of `fault-N` and one line `REQ fault-N` on
stdout (flushed) when it arrives, so a test can count what the server received. Every request
also logs `AUTH <path> <digest>`: `auth_digest` of its Authorization header (`-` without one), so
a test can tell which key a server got without the key being written anywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

MODES = (
    "ok", "recording", "huge_event", "huge_stream", "huge_error", "slowloris", "echo_auth", "endless",
    "echo_key_mangled", "escapes", "metrics_inf", "metrics_mixed", "metrics_negative", "metrics_reset",
    "metrics_huge", "metrics_garbage",
)  # fmt: skip
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\u202eevil"  # title, clear screen, colour, CR, bidi
HUGE_BYTES = 50 * 1024 * 1024
HUGE_METRICS_BYTES = 17 * 1024 * 1024  # past swarm/orchestrate/pollers.py's MAX_SCRAPE_BYTES (16 MiB)
RESET_BASE = 10**9  # metrics_reset's counters before the restart: what the server counted before the run
_handed = 0  # the completion requests this process has handed an id (`fault-N`)
_counter_lock = threading.Lock()
_scrapes = iter(range(1 << 62))  # this process' /metrics scrapes, from 0
_restart_at = 0  # metrics_reset: the completions counted when the server "restarted"


_log_lock = threading.Lock()


def log_line(line: str) -> None:
    """One whole line on stdout, flushed. `print` from the handler threads wrote a line and its
    newline in two writes, so two requests arriving together could log `AUTH ...REQ fault-2` on one
    line and the test missed a request the server got (a fresh-clone run failed so)."""
    with _log_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _chunk(rid: str, delta: dict, completion_tokens: int, finish: str | None = None) -> bytes:
    obj = {"id": rid, "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
           "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens,
                     "total_tokens": 5 + completion_tokens}}  # fmt: skip
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _head(status: str, rid: str, ctype: str = "text/event-stream", length: int | None = None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nx-request-id: {rid}\r\n{framing}\r\n\r\n"
    ).encode()


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body) if body else b""


def ok_stream(rid: str, tokens: int = 3) -> bytes:
    body = _chunk(rid, {"role": "assistant", "content": ""}, 0)
    for i in range(1, tokens + 1):
        body += _chunk(rid, {"content": "x"}, i, "length" if i == tokens else None)
    return body + b"data: [DONE]\n\n"


class Handler(socketserver.BaseRequestHandler):
    mode = "ok"

    def handle(self) -> None:
        global _handed
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(b":")
                    headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
                length = int(headers.get("content-length", 0))
                while len(rest) < length:
                    data = sock.recv(65536)
                    if not data:
                        return
                    rest += data
                buf, payload = rest[length:], rest[:length]
                request_line = lines[0].decode("latin-1")
                path = request_line.split(" ")[1] if " " in request_line else ""
                log_line(f"AUTH {path} {auth_digest(headers.get('authorization'))}")
                if request_line.startswith("GET /health"):
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                elif request_line.startswith("GET /v1/models"):
                    body = json.dumps(
                        {"object": "list", "data": [{"id": "m", "owned_by": "vllm", "max_model_len": 4096}]}
                    ).encode()
                    sock.sendall(_head("200 OK", "models", "application/json", len(body)) + body)
                elif (
                    request_line.startswith(("POST /tokenize", "POST /detokenize"))
                    and self.mode == "recording"
                ):
                    from swarm.sim.protocol import detokenize_answer, tokenize_answer

                    asked = json.loads(payload)
                    answer = (
                        tokenize_answer(asked, 4096)
                        if path.startswith("/tokenize")
                        else detokenize_answer(asked)
                    )
                    body = json.dumps(answer).encode()
                    sock.sendall(_head("200 OK", "tokenize", "application/json", len(body)) + body)
                elif request_line.startswith("GET /metrics") and self.mode == "recording":
                    body = b'vllm:num_requests_running{model_name="m"} 0.0\n'
                    sock.sendall(_head("200 OK", "metrics", "text/plain", len(body)) + body)
                elif request_line.startswith("GET /metrics") and self.mode == "escapes":
                    body = f"{ESCAPES} not prometheus text\n".encode()
                    sock.sendall(_head("200 OK", "metrics", "text/plain", len(body)) + body)
                elif request_line.startswith("GET /metrics") and self.mode.startswith("metrics_"):
                    with _counter_lock:
                        scrape, answered = next(_scrapes), _handed
                    body = metrics_text(self.mode, scrape, answered)
                    sock.sendall(_head("200 OK", "metrics", "text/plain", len(body)) + body)
                elif request_line.startswith("GET "):  # /version, /props, ...: not a completion
                    sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                else:
                    with _counter_lock:
                        _handed += 1
                        rid = f"fault-{_handed}"
                    log_line(f"REQ {rid}")
                    if not self.answer(sock, rid, headers):
                        return
        except OSError:  # the client hung up on a hostile answer: that is the point
            return

    def answer(self, sock: socket.socket, rid: str, headers: dict[str, str]) -> bool:
        """Write the mode's answer; False when the connection must close afterwards."""
        mode = self.mode
        if mode in ("ok", "recording") or mode.startswith("metrics_"):
            sock.sendall(_head("200 OK", rid) + _chunked(ok_stream(rid)) + b"0\r\n\r\n")
            return True
        if mode == "echo_auth":
            body = json.dumps(
                {
                    "error": {
                        "message": f"invalid credentials: {headers.get('authorization', '')}",
                        "type": "AuthenticationError",
                        "code": 401,
                    }
                }
            ).encode()
            sock.sendall(_head("401 Unauthorized", rid, "application/json", len(body)) + body)
            return True
        if mode in ("echo_key_mangled", "escapes"):
            key = headers.get("authorization", "").removeprefix("Bearer ")
            message = (
                f"upstream refused {key.upper()} (key {key[:10]}...)"
                if mode == "echo_key_mangled"
                else ESCAPES
            )
            body = json.dumps(
                {"error": {"message": message, "type": "InternalServerError", "code": 500}},
                ensure_ascii=False,
            ).encode()
            sock.sendall(_head("500 Internal Server Error", rid, "application/json", len(body)) + body)
            return True
        if mode == "huge_event":
            sock.sendall(
                _head("200 OK", rid, length=None)
                + _chunked(_chunk(rid, {"role": "assistant", "content": ""}, 0) + b"data: ")
            )
            block = _chunked(b"x" * (1 << 20))
            for _ in range(HUGE_BYTES >> 20):
                sock.sendall(block)
            sock.sendall(_chunked(b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n")
            return True
        if mode == "huge_stream":
            sock.sendall(
                _head("200 OK", rid) + _chunked(_chunk(rid, {"role": "assistant", "content": ""}, 0))
            )
            text = "y" * 4096
            n = HUGE_BYTES // (len(text) + 250)
            batch = b""
            for i in range(1, n + 1):
                batch += _chunk(rid, {"content": text}, i, "length" if i == n else None)
                if len(batch) >= 1 << 20 or i == n:
                    sock.sendall(_chunked(batch))
                    batch = b""
            sock.sendall(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            return True
        if mode == "huge_error":
            prefix = (
                b'{"error": {"message": "too much", "type": "InternalServerError", "code": 500}, "pad": "'
            )
            suffix = b'"}'
            pad = HUGE_BYTES - len(prefix) - len(suffix)
            sock.sendall(_head("500 Internal Server Error", rid, "application/json", HUGE_BYTES) + prefix)
            block = b"z" * (1 << 20)
            while pad > 0:
                sock.sendall(block[:pad])
                pad -= len(block)
            sock.sendall(suffix)
            return True
        if mode == "slowloris":
            body = ok_stream(rid)
            wire = _head("200 OK", rid, length=len(body)) + body
            for i in range(len(wire)):
                sock.sendall(wire[i : i + 1])
                time.sleep(1.0)
            return True
        if mode == "endless":
            sock.sendall(
                _head("200 OK", rid) + _chunked(_chunk(rid, {"role": "assistant", "content": ""}, 0))
            )
            # _chunk's bytes with the token count as a hole (json.dumps per chunk would be the bottleneck)
            template = _chunk(rid, {"content": "x"}, 999_999_999).replace(b"999999999", b"%d")
            template = template.replace(str(5 + 999_999_999).encode(), b"%d")
            i = 0
            while True:  # until the client hangs up (OSError, caught in handle)
                sock.sendall(_chunked(b"".join(template % (i + k, 5 + i + k) for k in range(1, 257))))
                i += 256
        raise ValueError(mode)


def metrics_text(mode: str, scrape: int, answered: int) -> bytes:
    """A `metrics_*` mode's /metrics at this process' `scrape`-th scrape (from 0), `answered`
    completion requests in (each answered at once, as `ok` answers). Its gauges read KV-bound (KV
    usage 95% while 2 requests wait), a cause the diagnosis names where the gauges pass its checks."""
    global _restart_at
    from tests.unit.analysis import family_texts as ft

    def vllm(running: float | str = 1, waiting: float | str = 2, success: float | None = None, **kw) -> str:
        n = answered if success is None else success
        kw.setdefault("generation", 3 * answered)  # `ok` streams 3 tokens
        return ft.vllm(running, waiting, 0.95, success=n, model="m", **kw)

    if mode == "metrics_inf":  # the +Inf bucket, so the _count, read +Inf
        return vllm(ttft_counts=[0, *[answered] * 15, "+Inf"], ttft_sum=0.002).encode()
    if mode == "metrics_mixed":
        return (vllm() + ft.sglang(1, 2, 0.95, requests=answered, model="m")).encode()
    if mode == "metrics_negative":
        return vllm(running=-3, success=-289).encode()
    if mode == "metrics_reset":  # restarted right after its second scrape: counted from 0 since
        if scrape == 1:
            _restart_at = answered
        n = RESET_BASE + answered if scrape < 2 else answered - _restart_at
        return vllm(success=n, generation=3 * n).encode()
    if mode == "metrics_garbage":
        return (vllm(running="NaN") + ("" if scrape % 2 else "this is {not prometheus text\n")).encode()
    if mode == "metrics_huge":
        pad = b"# " + b"p" * 1021 + b"\n"  # comments: the scrape stays valid Prometheus text
        return vllm().encode() + pad * (HUGE_METRICS_BYTES // len(pad) + 1)
    raise ValueError(mode)


def serve(mode: str, port: int) -> None:
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    handler = type("H", (Handler,), {"mode": mode})
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    print(f"fault server {mode} on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()


@contextlib.contextmanager
def fault_server(tmp_path: Path, mode: str) -> Iterator[tuple[str, Path]]:
    """Start one as a process on a free port; yields (base URL, log file with the REQ lines)."""
    from tests.helpers.support import free_port, start, wait_http

    port = free_port()
    log = tmp_path / f"fault-{mode}-{port}.log"
    with start([sys.executable, str(Path(__file__)), mode, str(port)], log) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout=30, proc=proc.popen, log=log)
        yield url, log


def auth_digest(value: str | None) -> str:
    """What the log shows of an Authorization header: a digest, `-` when there was none."""
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value else "-"


def auths(log: Path) -> list[tuple[str, str]]:
    """(path, auth_digest) of every request the server got, in order."""
    return [tuple(line.split()[1:3]) for line in log.read_text().splitlines() if line.startswith("AUTH ")]


def received(log: Path) -> list[str]:
    """The request ids the server handed out, in order."""
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("REQ ")]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's swarm (its /tokenize)
    serve(sys.argv[1], int(sys.argv[2]))
