"""swarm/orchestrate/serverproc.py's readiness: a server is ready when the first of /health,
/v1/models and / that it has answers 2xx (Ollama has no /health; llama.cpp's /health says 503 while
it loads, though its /v1/models answers). Starting real servers: integration/test_swarm_target.py;
the embedded simulator's Ollama face: integration/test_run_options.py."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from swarm.orchestrate.serverproc import answers_ready, wait_answering
from tests.helpers.support import free_port


def paths_server(answers: dict[str, int]) -> ThreadingHTTPServer:
    """Answers GET PATH with answers[PATH] (404 for any other path)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(answers.get(self.path, 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


@pytest.mark.parametrize(
    "answers, ready",
    [
        ({"/health": 200}, True),  # vLLM, SGLang, TGI, TensorRT-LLM, llama.cpp once loaded
        ({"/v1/models": 200, "/": 200}, True),  # Ollama: no /health
        ({"/": 200}, True),  # a server with a root page only
        ({"/health": 503, "/v1/models": 200}, False),  # llama.cpp loading its model
        ({"/health": 405, "/v1/models": 503}, False),
        ({}, False),  # answers nothing it knows
    ],
)
def test_the_first_path_the_server_has_decides(answers, ready):
    srv = paths_server(answers)
    try:
        assert answers_ready(f"http://127.0.0.1:{srv.server_address[1]}") is ready
    finally:
        srv.shutdown()


def test_nothing_listening_is_not_ready_until_the_time_is_up():
    assert not wait_answering(f"http://127.0.0.1:{free_port()}", None, timeout_s=0.3)
