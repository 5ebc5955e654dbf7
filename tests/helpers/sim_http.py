"""A small HTTP client for talking to `swarm sim` (and reading its /metrics and trace): shared by
tests/integration/test_sim_http.py and test_sim_faults.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families

MSGS = [{"role": "user", "content": "中国首都是哪里"}]


@dataclass
class Reply:
    status: int  # 0: connection dropped before a status line
    headers: dict[str, str]
    raw: bytes
    complete: bool  # False: the body was cut off
    elapsed: float

    def json(self):
        return json.loads(self.raw)

    @property
    def rid(self) -> str:
        return self.headers["x-request-id"]

    def events(self) -> list[bytes]:
        out = []
        for e in self.raw.split(b"\n\n"):
            if e:
                assert e.startswith(b"data: "), e
                out.append(e[6:])
        return out

    def chunks(self) -> list[dict]:
        ev = self.events()
        assert ev[-1] == b"[DONE]"
        return [json.loads(e) for e in ev[:-1]]


def call(url: str, path: str, body=None, *, method: str = "POST", headers: dict | None = None) -> Reply:
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    t0 = time.monotonic()
    try:
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        try:
            resp = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):
            return Reply(0, {}, b"", False, time.monotonic() - t0)
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        try:
            raw, complete = resp.read(), True
        except http.client.IncompleteRead as e:
            raw, complete = e.partial, False
        return Reply(resp.status, hdrs, raw, complete, time.monotonic() - t0)
    finally:
        conn.close()


def chat_body(max_tokens: int = 16, stream: bool = True, usage: bool = True, continuous: bool = False, **kw):
    body = {"model": "sim-model", "messages": MSGS, "max_tokens": max_tokens, "stream": stream, **kw}
    if stream and (usage or continuous):
        body["stream_options"] = {"include_usage": usage, "continuous_usage_stats": continuous}
    return body


def token_chunks(chunks: list[dict]) -> list[dict]:
    """Chunks that carry generated tokens: not the role chunk, not the usage-only chunk."""
    return [c for c in chunks if c["choices"] and "role" not in c["choices"][0].get("delta", {})]


def delta_text(chunk: dict) -> str:
    ch = chunk["choices"][0]
    if "text" in ch:
        return ch["text"]
    return next(iter(ch["delta"].values()), "")


def scrape(url: str) -> dict[tuple, float]:
    with urllib_open(url + "/metrics") as text:
        out = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out


HELLO = [{"role": "user", "content": "hello " * 40}]  # a repeated prompt: the prefix cache hits


@contextlib.contextmanager
def trickle(urls: list[str], body: dict) -> Iterator[None]:
    """`body` to each URL's /v1/chat/completions every 0.2 s until the block ends (the same prompt each
    time: the counters keep moving and the prefix cache hits), for a Prometheus to scrape."""
    stop = threading.Event()
    raw = json.dumps(body).encode()

    def loop() -> None:
        while not stop.wait(0.2):
            for url in urls:
                req = urllib.request.Request(
                    url + "/v1/chat/completions", raw, {"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=10) as r:
                    r.read()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=15)


def urllib_open(url: str):
    import contextlib
    import urllib.request

    @contextlib.contextmanager
    def cm():
        with urllib.request.urlopen(url, timeout=10) as r:
            yield r.read().decode()

    return cm()


def metric(samples: dict, name: str, **labels) -> float:
    want = {"model_name": "sim-model", "engine": "0", **labels}
    for (n, lbls), v in samples.items():
        if n == name and all(dict(lbls).get(k) == v2 for k, v2 in want.items()):
            return v
    raise KeyError(f"{name} {labels} not in /metrics")


def read_trace(path: Path, ids: list[str], timeout: float = 3.0) -> dict[str, dict]:
    """Trace lines by id; waits briefly for lines still being written."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        by_id = {rec["id"]: rec for rec in lines}
        if all(i in by_id for i in ids) or time.monotonic() > deadline:
            return by_id
        time.sleep(0.05)
