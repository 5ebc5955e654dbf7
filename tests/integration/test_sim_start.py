"""The tests' simulator helper (tests/helpers/support.py `sim_server`) is ready only when the
simulator itself listens: a port another server took between the pick and the bind (ci24: another
test's server answered /health in the simulator's place) sends it to another port."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.helpers import support

pytestmark = pytest.mark.integration


class Foreign(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"not the simulator")

    def log_message(self, *_args):
        pass


def test_a_port_taken_between_the_pick_and_the_bind_is_left_for_another(tmp_path, monkeypatch):
    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    taken = foreign.server_address[1]
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    picks = iter([taken])
    pick = support.free_port
    monkeypatch.setattr(support, "free_port", lambda: next(picks, None) or pick())
    try:
        with support.sim_server(tmp_path) as sim:
            port = int(sim.url.rsplit(":", 1)[1])
            assert port != taken and support.serves_on(sim.proc.popen.pid, port)
            assert sim.get("/health") == b""  # the simulator's (vLLM's) empty 200, not the foreign one's
            assert not support.serves_on(sim.proc.popen.pid, taken)
        assert "already in use" in (tmp_path / f"sim-{taken}.log").read_text()
    finally:
        foreign.shutdown()
