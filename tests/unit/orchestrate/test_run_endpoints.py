"""`swarm run --host A,B` (swarm/orchestrate/run.py): every endpoint checked before the load starts
(one line naming the one that does not answer or lacks --model's model; different models said),
and one server-metrics poller per endpoint, each into its own file named in endpoints.json."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from swarm.core.apikey import NO_KEY, BoundKey, bind_origins
from swarm.core.errors import TargetError, UsageError
from swarm.core.runfiles import ENDPOINTS_JSON, SERVER_METRICS, endpoint_metrics_name
from swarm.orchestrate import run
from tests.helpers.support import free_port


def status_server(status: int, body: bytes) -> ThreadingHTTPServer:
    """Answers every GET with `status` and `body` (a plain web server, an auth proxy)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


def models_server(owner: str, *names: str) -> ThreadingHTTPServer:
    return status_server(200, json.dumps({"data": [{"id": n, "owned_by": owner} for n in names]}).encode())


@pytest.fixture(scope="module")
def two():
    a, b = models_server("vllm", "qwen"), models_server("llamacpp", "tiny.gguf")
    yield tuple(f"http://127.0.0.1:{s.server_address[1]}" for s in (a, b))
    for s in (a, b):
        s.shutdown()


def test_endpoints_serving_different_models_are_said_and_each_sent_its_own(two, capsys):
    run.check_targets(two, NO_KEY)
    out = capsys.readouterr().out
    assert f"{two[0]} serves qwen, {two[1]} serves tiny.gguf" in out and "each is sent its own" in out


def test_model_is_checked_on_every_endpoint_naming_the_one_that_lacks_it(two):
    run.check_targets(two, NO_KEY, model="qwen")  # llama.cpp answers any name with its one model
    vllm_only = (two[0], two[0].replace("127.0.0.1", "localhost"))
    with pytest.raises(UsageError, match=rf"tiny.gguf is not served .* \(endpoint {two[0]}\)"):
        run.check_targets(vllm_only, NO_KEY, model="tiny.gguf")


def test_an_endpoint_that_does_not_answer_is_named(two):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TargetError, match=f"target {dead} is unreachable"):
        run.check_targets((two[0], dead), NO_KEY)


def test_one_poller_per_endpoint_each_into_its_own_file(tmp_path):
    from types import SimpleNamespace

    plan = SimpleNamespace(out=tmp_path, server_metrics=None, model=None, server_family="auto")
    hosts = ("http://u:p@a:1", "http://b:2")
    key = BoundKey("sk-1", bind_origins(None, ",".join(hosts)))
    pollers = run._server_pollers(plan, hosts, key)
    assert [p.url for p in pollers] == ["http://u:p@a:1/metrics", "http://b:2/metrics"]
    assert [p.out_path.name for p in pollers] == [endpoint_metrics_name(0), endpoint_metrics_name(1)]
    index = json.loads((tmp_path / ENDPOINTS_JSON).read_text())["endpoints"]
    assert index == [{"label": "http://a:1", "server_metrics": endpoint_metrics_name(0)},
                     {"label": "http://b:2", "server_metrics": endpoint_metrics_name(1)}]  # fmt: skip
    auths = [p.key.request(p.url).unredirected_hdrs for p in pollers]
    assert auths == [{"Authorization": "Bearer sk-1"}] * 2  # each endpoint given at start gets it
    (one,) = run._server_pollers(plan, ("http://b:2",), NO_KEY)
    assert one.out_path.name == SERVER_METRICS and one.key.request(one.url).unredirected_hdrs == {}


def test_model_ids_the_endpoints_name_are_printed_as_one_bounded_line(capsys):
    """The ids come from the endpoints' /v1/models: a CR LF in one would forge a line (issue 41)."""
    servers = models_server("vllm", "a\r\nswarm: forged" + "x" * 500), models_server("vllm", "b")
    try:
        run.check_targets([f"http://127.0.0.1:{s.server_address[1]}" for s in servers], NO_KEY)
    finally:
        for s in servers:
            s.shutdown()
    (line,) = capsys.readouterr().out.splitlines()
    assert "serves a\\x0d\\x0aswarm: forged" in line and "x" * 200 not in line


@pytest.mark.parametrize(
    "status, body, words",
    [  # `python -m http.server`: 404 on /v1/models; a web page: 200 with HTML
        (404, b"<h1>File not found</h1>", "answered GET /v1/models with HTTP 404 (<h1>File not found</h1>)"),
        (200, b"<html>hello</html>", "with a body that is not JSON (<html>hello</html>): not an OpenAI"),
    ],
)
def test_an_endpoint_that_lists_no_models_is_refused_saying_what_it_answered(status, body, words):
    srv = status_server(status, body)
    try:
        with pytest.raises(TargetError) as e:
            run.check_targets([f"http://127.0.0.1:{srv.server_address[1]}"], NO_KEY)
    finally:
        srv.shutdown()
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("status", [401, 403, 503])
def test_an_endpoint_that_answers_with_an_auth_or_server_error_is_left_to_the_requests(status):
    srv = status_server(status, b'{"error": "no"}')
    try:
        assert run.check_target(f"http://127.0.0.1:{srv.server_address[1]}", NO_KEY) is None
    finally:
        srv.shutdown()
