"""swarm/core/prefix_cache.py: POST /reset_prefix_cache, best effort (True only where the server
emptied its cache), the key only where it is bound."""

from __future__ import annotations

import http.server
import threading

import pytest

from swarm.core.apikey import BoundKey
from swarm.core.prefix_cache import reset_prefix_cache
from swarm.orchestrate.processes import free_port


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_POST(self):
        self.send_response(self.status if self.path == "/reset_prefix_cache" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, offered", [(200, True), (404, False)])
def test_reset_prefix_cache(status, offered):
    handler = type("H", (_Handler,), {"status": status})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert reset_prefix_cache(f"http://127.0.0.1:{server.server_port}") is offered
    finally:
        server.shutdown()


def test_reset_prefix_cache_of_nothing_listening():
    assert reset_prefix_cache(f"http://127.0.0.1:{free_port()}", timeout_s=1) is False


def _authorizations(calls) -> list[str | None]:
    """The Authorization header of each request `calls(url)` makes to a recording server."""
    seen: list[str | None] = []

    class Recording(_Handler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def do_POST(self):
            seen.append(self.headers.get("Authorization"))
            super().do_POST()

    server = http.server.HTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        calls(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    return seen


def test_a_bound_key_goes_with_the_reset_to_its_origin_only():
    def calls(url: str) -> None:
        assert reset_prefix_cache(url + "/", key=BoundKey("sk-1", url)) is True
        assert reset_prefix_cache(url, key=BoundKey("sk-1", "http://elsewhere:1")) is True

    assert _authorizations(calls) == ["Bearer sk-1", None]


def test_a_reset_without_a_bound_key_carries_none(monkeypatch):
    """Without a bound key (swarm tune's call), the health wait and the reset carry none, a key in
    the environment included (it is for the configuration's swarm run, which applies its origin rule)."""
    from swarm.orchestrate.processes import wait_http

    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")

    def calls(url: str) -> None:
        assert wait_http(url + "/health", None, 5) and reset_prefix_cache(url)

    assert _authorizations(calls) == [None, None]
