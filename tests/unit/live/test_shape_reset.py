"""--reset-prefix-cache (swarm/live/shape.py `_reset_prefix_caches`): before a stage, every
endpoint of --host gets `POST /reset_prefix_cache` at its base URL, the key only where it
is bound, and the log says per stage which endpoints emptied their cache and which do not offer it."""

from __future__ import annotations

import argparse
import http.server
import logging
import threading
from typing import ClassVar

from locust.env import Environment

from swarm.live.shape import _reset_prefix_caches
from swarm.live.state import swarm_state


class _Recording(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_POST(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(200 if self.path == "/reset_prefix_cache" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_each_endpoint_is_asked_at_its_base_url_and_the_log_says_which_emptied(caplog):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    dead = "http://127.0.0.1:1"
    opts = argparse.Namespace(reset_prefix_cache=True, api_key="sk-9")
    env = Environment(host=f"{url}/,{dead}", parsed_options=opts)
    swarm_state(env).key_origin = url
    try:
        with caplog.at_level(logging.INFO, logger="swarm.live.shape"):
            _reset_prefix_caches(env, 1)
    finally:
        server.shutdown()
    assert _Recording.seen == [("/reset_prefix_cache", "Bearer sk-9")]
    assert f"swarm: stage 2: prefix cache emptied at {url}; not offered (or failed) at {dead}" in caplog.text
