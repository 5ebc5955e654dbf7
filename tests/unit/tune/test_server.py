"""A configuration's server (swarm/tune/server.py): a server that exits or never answers
is ServerFailed with its log's tail; the prefix-cache reset is best effort."""

from __future__ import annotations

import http.server
import sys
import threading

import pytest

from swarm.orchestrate.processes import free_port
from swarm.tune import server as tune_server


def test_a_server_that_exits_fails_with_its_log_tail(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('unknown flag --no-such-flag'); sys.exit(3)"]
    with pytest.raises(tune_server.ServerFailed) as e:
        tune_server.start(cmd, f"http://127.0.0.1:{free_port()}", tmp_path / "s.log", 30)
    assert "exited with code 3" in e.value.reason and "\n" not in e.value.reason
    assert "unknown flag --no-such-flag" in e.value.log_tail


def test_a_server_that_never_answers_is_stopped(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(tune_server.ServerFailed) as e:
        tune_server.start(cmd, f"http://127.0.0.1:{free_port()}", tmp_path / "s.log", 1)
    assert "did not answer" in e.value.reason


def test_a_command_that_does_not_exist(tmp_path):
    with pytest.raises(tune_server.ServerFailed, match="could not start"):
        tune_server.start(["/no/such/server"], "http://127.0.0.1:1", tmp_path / "s.log", 1)


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
        assert tune_server.reset_prefix_cache(f"http://127.0.0.1:{server.server_port}") is offered
    finally:
        server.shutdown()


def test_reset_prefix_cache_of_nothing_listening():
    assert tune_server.reset_prefix_cache(f"http://127.0.0.1:{free_port()}", timeout_s=1) is False


def test_the_tunes_own_requests_carry_no_key(monkeypatch):
    """The health wait and the prefix-cache reset go to the server tune started, without any key
    (a key in the environment is for the configuration's swarm run, which applies its origin rule)."""
    from swarm.orchestrate.processes import wait_http

    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
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
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert wait_http(url + "/health", None, 5) and tune_server.reset_prefix_cache(url)
    finally:
        server.shutdown()
    assert seen == [None, None]
