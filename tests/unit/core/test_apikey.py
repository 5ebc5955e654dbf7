"""The API key's origin rule (the one every request of the swarm follows) and its scrub
(swarm/core/apikey.py)."""

from __future__ import annotations

import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from swarm.core.apikey import NO_KEY, SCRUB_MIN_RUN, BoundKey, bind_origins, key_for, origin, scrub
from swarm.core.errors import UsageError

KEY = "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("HTTP://User:pw@Example.COM/v1/", "http://example.com:80"),  # case, credentials, path, port
        ("https://example.com", "https://example.com:443"),
        ("https://[::1]:8443/x", "https://[::1]:8443"),
        ("http://[::1", None),
        ("http://a:99999", None),
        ("ftp://a", None),
        ("127.0.0.1:8000", None),
        ("", None),
        (None, None),
    ],
)
def test_origin(url, expected):
    assert origin(url) == expected


def test_the_key_goes_to_its_origin_only():
    bound = origin("http://gpu-host:8000")
    assert key_for(KEY, bound, "http://gpu-host:8000/v1") == KEY
    assert key_for(KEY, bound, "http://GPU-HOST:8000") == KEY
    for other in ("http://gpu-host:8001", "https://gpu-host:8000", "http://attacker:8000", "http://gpu-host"):
        assert key_for(KEY, bound, other) is None, other
    assert key_for(KEY, None, "http://gpu-host:8000") is None  # no origin: sent to no one
    assert key_for(None, bound, "http://gpu-host:8000") is None


def test_scrub_in_any_case_and_any_run_of_8():
    text = f"refused {KEY.upper()}; key {KEY[:10]}...; tail {KEY[-8:]}; middle x{KEY[5:17]}x"
    assert scrub(text, KEY) == "refused ***; key ***...; tail ***; middle x***x"
    assert scrub(f"Bearer {KEY}", KEY) == "Bearer ***"
    assert scrub(f"{KEY.lower()}{KEY}", KEY) == "***"  # adjacent runs: one mask


def test_scrub_leaves_runs_shorter_than_8():
    assert SCRUB_MIN_RUN == 8
    short = KEY[3:10]  # 7 characters of the key
    assert scrub(f"got {short} and sk- and {KEY[:7]}", KEY) == f"got {short} and sk- and {KEY[:7]}"
    assert scrub("", KEY) == "" and scrub("abc", None) == "abc"


def test_scrub_a_short_key_only_whole():
    assert scrub("abcABCab abc", "aBc") == "***ab ***"  # (adjacent: one mask)


def test_scrub_keeps_non_ascii_text_aligned():
    assert scrub(f"İ错误 {KEY.upper()} é", KEY) == "İ错误 *** é"


# ------------------------------------------------------------- the one rule: bound origins, requests


def test_the_origins_bound_given_else_each_host_else_the_users_one_host():
    a, b = "http://a:8000", "http://b:9000/v1"
    assert bind_origins(b, a) == "http://b:9000"  # --api-key-origin rules over --host
    assert bind_origins(f"{a},{b},{a}", None) == "http://a:8000,http://b:9000"  # several, no repeats
    assert bind_origins(None, f"{a},{b}") == "http://a:8000,http://b:9000"  # each endpoint given
    assert bind_origins(None, None, ("http://c:1", "http://c:1/x")) == "http://c:1"
    assert bind_origins(None, None, ("http://c:1", "http://d:1")) is None  # two hosts: no origin
    assert bind_origins(None, "not a url") is None and bind_origins(None, None) is None
    for bad in ("gpu-host:8000", "http://a:1,ftp://b", "http://[::1"):
        with pytest.raises(UsageError, match=r"--api-key-origin .* is not an http"):
            bind_origins(bad, a)


def test_the_key_goes_to_each_bound_origin_and_no_other():
    bound = bind_origins("http://a:1,http://b:2", None)
    assert key_for(KEY, bound, "http://a:1/metrics") == KEY and key_for(KEY, bound, "http://B:2") == KEY
    assert key_for(KEY, bound, "http://c:3") is None and key_for(KEY, bound, "http://a:2") is None
    assert key_for(KEY, "", "http://a:1") is None


def test_a_bound_key_request_carries_it_only_at_its_origin_and_never_in_its_repr():
    bk = BoundKey(KEY, "http://a:1")
    assert bk.request("http://a:1/v1/models").unredirected_hdrs == {"Authorization": f"Bearer {KEY}"}
    assert not bk.request("http://b:1/v1/models").has_header("Authorization")
    assert not NO_KEY.request("http://a:1/").has_header("Authorization")
    req = bk.request("http://a:1/t", b"{}", {"Content-Type": "application/json"}, method="POST")
    assert req.get_method() == "POST" and req.headers == {"Content-type": "application/json"}
    assert KEY not in repr(bk) and KEY not in str(bk)


def recording_server(status: int = 200, location: str | None = None) -> tuple[ThreadingHTTPServer, list]:
    """A loopback server that logs each request's (path, Authorization) and answers `status`."""
    got: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            got.append((self.path, self.headers.get("Authorization")))
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, got


def test_a_redirect_from_the_keys_origin_goes_on_without_the_key():
    """urllib copies a request's ordinary headers onto a redirect to any host: the key's own origin
    answering 302 to another must not hand that one the key."""
    other, at_other = recording_server()
    elsewhere = f"http://127.0.0.1:{other.server_port}/landing"
    home, at_home = recording_server(302, elsewhere)
    url = f"http://127.0.0.1:{home.server_port}"
    try:
        with urllib.request.urlopen(BoundKey(KEY, origin(url)).request(url + "/v1/models"), timeout=5) as r:
            assert r.read() == b"ok"
    finally:
        home.shutdown()
        other.shutdown()
    assert at_home == [("/v1/models", f"Bearer {KEY}")] and at_other == [("/landing", None)]
