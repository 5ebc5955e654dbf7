"""swarm/orchestrate/serverproc.py: a server's log tail, bounded whatever the server wrote; its
readiness: a server is ready when the first of /health, /v1/models and / that it has answers 2xx
(Ollama has no /health; llama.cpp's /health says 503 while it loads, though its /v1/models answers).
Starting real servers: integration/test_swarm_target.py; the embedded simulator's Ollama face:
integration/test_run_options.py."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from swarm.orchestrate.serverproc import TAIL_LINE_CHARS, answers_ready, log_tail, wait_answering
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


def test_a_short_log_is_its_last_lines_without_the_route_table(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("one\nRoute: /v1/models\ntwo\nthree\n")
    assert log_tail(log, lines=2) == "two\nthree"
    assert log_tail(tmp_path / "none.log") == "(no log)"


def test_a_huge_line_is_cut_and_only_the_logs_end_is_read(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("start\n" + "x" * 20_000_000 + "\nError: out of memory\n")
    tail = log_tail(log, lines=30)
    first, last = tail.splitlines()
    assert last == "Error: out of memory"
    assert first.startswith("[... the log's first ") and "bytes not read]" in first
    assert first.endswith("more characters cut]")
    assert len(tail) < 2 * TAIL_LINE_CHARS


def test_every_line_is_bounded(tmp_path):
    log = tmp_path / "s.log"
    log.write_text(("y" * 3 * TAIL_LINE_CHARS + "\n") * 5)
    lines = log_tail(log, lines=30).splitlines()
    assert len(lines) == 5
    assert all(len(line) < TAIL_LINE_CHARS + 60 for line in lines)
    assert lines[0].endswith(f" [... {2 * TAIL_LINE_CHARS} more characters cut]")
