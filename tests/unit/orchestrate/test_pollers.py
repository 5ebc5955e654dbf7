"""The run-time pollers (swarm/orchestrate/pollers.py): the target's /metrics and dcgm-exporters
scraped in a thread into the run directory, and a target without usable metrics said once."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from swarm.analysis.gpu_metrics import read_gpu_snapshots
from swarm.analysis.server_metrics import metrics_url, read_snapshots, unobservable_reason
from swarm.core.runfiles import GPU_METRICS
from swarm.orchestrate.pollers import ServerPoller, start_gpu_pollers
from tests.helpers.dcgm_standin import exposition
from tests.helpers.support import DATA


def fixture(name: str) -> str:
    return (DATA / name).read_text()


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self):
        self.send_response(self.status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server():
    servers = []

    def serve(body: bytes, status: int = 200) -> str:
        handler = type("H", (_Handler,), {"body": body, "status": status})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield serve
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_poller_writes_snapshots(tmp_path, metrics_server):
    url = metrics_url(metrics_server(fixture("vllm_0_33_metrics.txt").encode()) + "/")
    out = tmp_path / "server_metrics.jsonl"
    logs: list[str] = []
    poller = ServerPoller(url, out, interval_s=0.05, model="qwen3.6-27b", log=logs.append).start()
    threading.Event().wait(0.3)
    poller.stop()
    snaps = read_snapshots(out)
    assert len(snaps) == poller.samples >= 3 and logs == []
    assert snaps[0].running == 195 and snaps[-1].ts >= snaps[0].ts
    assert (tmp_path / "server_metrics_sample.txt").read_text().startswith("# HELP")


@pytest.mark.parametrize("kind", ["404", "refused", "html"])
def test_poller_degrades_gracefully(tmp_path, metrics_server, kind):
    if kind == "404":
        url = metrics_server(b"not found", status=404) + "/metrics"
    elif kind == "html":
        url = metrics_server(b"<html><body>hello</body></html>") + "/metrics"
    else:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"  # closed again: refused
    logs: list[str] = []
    poller = ServerPoller(url, tmp_path / "m.jsonl", interval_s=0.02, timeout_s=1, log=logs.append).start()
    threading.Event().wait(0.15)
    poller.stop()
    assert len(logs) == 1 and logs[0].startswith("swarm: server side not observable (")  # said once
    assert logs[0].endswith("): the diagnosis uses the client's own signals only")
    assert poller.samples == 0 and not (tmp_path / "m.jsonl").exists()
    assert (
        unobservable_reason(tmp_path / "m.jsonl") == logs[0].split("(", 1)[1].rsplit(")", 1)[0]
    )  # for the diagnosis
    if kind == "404":
        assert unobservable_reason(tmp_path / "m.jsonl") == f"HTTP 404 at {url}"


def _one_scrape(tmp_path, url: str, family: str) -> tuple[ServerPoller, list[str]]:
    logs: list[str] = []
    poller = ServerPoller(url, tmp_path / "m.jsonl", family=family, timeout_s=1, log=logs.append)
    poller.scrape_once()
    return poller, logs


def test_a_forced_family_reads_its_names_and_a_wrong_one_is_one_line(tmp_path, metrics_server):
    url = metrics_url(metrics_server(fixture("vllm_0_33_metrics.txt").encode()))
    poller, logs = _one_scrape(tmp_path, url, "vllm")
    assert poller.samples == 1 and logs == [] and read_snapshots(tmp_path / "m.jsonl")[0].source == "vllm"
    poller, logs = _one_scrape(tmp_path / "wrong", url, "sglang")
    assert poller.samples == 0 and len(logs) == 1, logs  # no snapshot of empty fields: one line
    assert (
        f"(--server-family sglang: none of SGLang's metric names, the names are vllm's, at {url})" in logs[0]
    )


def test_family_none_scrapes_nothing_and_trtllm_json_metrics_are_named(tmp_path, metrics_server):
    url = metrics_url(metrics_server(b'[{"iter": 1, "numActiveRequests": 2}]'))
    logs: list[str] = []
    poller = ServerPoller(url, tmp_path / "m.jsonl", family="none", log=logs.append).start()
    poller.stop()
    assert logs == [
        "swarm: server side not observable (--server-family none): the diagnosis uses the client's own signals only"
    ]
    assert unobservable_reason(tmp_path / "m.jsonl") == "--server-family none" and poller.samples == 0
    poller, logs = _one_scrape(tmp_path / "json", url, "auto")
    assert poller.samples == 0 and "JSON, not Prometheus text" in logs[0] and "/prometheus/metrics" in logs[0]
    assert metrics_url("http://h:8000/", "trtllm") == "http://h:8000/prometheus/metrics"


def test_gpu_pollers_share_one_file_one_sample_per_exporter(tmp_path, metrics_server):
    urls = [
        metrics_server(exposition(host, [50.0], sm_active=False, scrape=1).encode()) + "/metrics"
        for host in ("gpu-a", "gpu-b")
    ]
    pollers = start_gpu_pollers(urls, tmp_path, interval_s=0.05)
    threading.Event().wait(0.3)
    for poller in pollers:
        poller.stop()
    lines = (tmp_path / GPU_METRICS).read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # whole lines: the writers share one lock
    hosts = {g.host for snap in read_gpu_snapshots(tmp_path / GPU_METRICS) for g in snap.gpus}
    assert hosts == {"gpu-a", "gpu-b"} and len(lines) == sum(p.samples for p in pollers)
    assert len(list(tmp_path.glob("gpu_metrics_sample_*.txt"))) == 2  # one raw sample per exporter


class _PathHandler(http.server.BaseHTTPRequestHandler):
    """JSON at /metrics, Prometheus text at /prometheus/metrics: trtllm-serve's two pages."""

    def do_GET(self):
        trt = self.path == "/prometheus/metrics"
        body = (
            b"# TYPE trtllm_num_requests_running gauge\ntrtllm_num_requests_running 3\n"
            b"# TYPE trtllm_generation_tokens_total counter\ntrtllm_generation_tokens_total 120\n"
            if trt
            else b'[{"iter": 1, "numActiveRequests": 3}]'
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4" if trt else "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("family", ["auto", "trtllm"])
def test_a_json_metrics_page_moves_to_trtllms_prometheus_page(tmp_path, family):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PathHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        poller, logs = _one_scrape(tmp_path, base + "/metrics", family)
        assert logs == [] and poller.samples == 1 and poller.url == base + "/prometheus/metrics"
        (snap,) = read_snapshots(tmp_path / "m.jsonl")
        assert (snap.source, snap.running, snap.generation_tokens) == ("trtllm", 3, 120)
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_server_that_stops_answering_is_not_called_unobservable(tmp_path, metrics_server):
    """Scraped, then down mid-run (an endpoint killed): one line saying so, its scrapes kept, no
    "not observable" for the diagnosis."""
    srv_url = metrics_server(fixture("vllm_0_33_metrics.txt").encode())
    logs: list[str] = []
    poller = ServerPoller(metrics_url(srv_url), tmp_path / "m.jsonl", timeout_s=1, log=logs.append)
    assert poller.scrape_once() is not None and poller.scrape_once() is not None
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        poller.url = (
            f"http://127.0.0.1:{s.getsockname()[1]}/metrics"  # closed again: refused, as a dead server
        )
    assert poller.scrape_once() is None and poller.scrape_once() is None
    assert len(logs) == 1 and "stopped answering after 2 scrapes" in logs[0], logs
    assert "not observable" not in logs[0] and unobservable_reason(tmp_path / "m.jsonl") is None
    assert len(read_snapshots(tmp_path / "m.jsonl")) == 2


def test_a_scrape_over_the_cap_is_dropped_unread_and_said_once(tmp_path, metrics_server):
    body = fixture("vllm_0_33_metrics.txt").encode()
    url = metrics_url(metrics_server(body))
    logs: list[str] = []
    poller = ServerPoller(url, tmp_path / "m.jsonl", timeout_s=1, log=logs.append, max_bytes=len(body) - 1)
    assert poller.scrape_once() is None and poller.scrape_once() is None and poller.scrape_once() is None
    assert poller.oversized == 3 and poller.samples == 0 and not (tmp_path / "m.jsonl").exists()
    assert logs == [
        f"swarm: server metrics: a scrape of more than {len(body) - 1:,} bytes (the cap per scrape) at {url} "
        "was dropped unread, as every one that large will be (said once)"
    ]
    assert unobservable_reason(tmp_path / "m.jsonl").startswith("a scrape of more than")
    poller.max_bytes = len(body)  # at the cap: read
    assert poller.scrape_once() is not None and poller.samples == 1 and len(logs) == 1


def test_the_names_of_two_families_are_said_once_with_the_family_read(tmp_path, metrics_server):
    from tests.unit.analysis import family_texts as ft

    url = metrics_url(metrics_server((ft.vllm(3, 1, 0.2) + ft.sglang(1, 0, 0.1)).encode()))
    poller, logs = _one_scrape(tmp_path, url, "auto")
    poller.scrape_once()
    assert poller.samples == 2 and len(logs) == 1, logs
    assert (
        "hold the metric names of vLLM and SGLang: read as vLLM's" in logs[0] and "--server-family" in logs[0]
    )
    assert read_snapshots(tmp_path / "m.jsonl")[0].families == ("vllm", "sglang")


def test_unusable_text_between_usable_scrapes_is_said_for_what_it_is(tmp_path, metrics_server):
    """A server that answers text the parser cannot use is not 'stopped answering' (it answers), and
    one whose first scrapes failed but a later one parsed is not left 'not observable' (test_hostile_
    metrics' garbage endpoint): the line says what happened, the diagnosis uses what could be read."""
    good, bad = fixture("vllm_0_33_metrics.txt").encode(), b"<html>not prometheus</html>\n"
    good_url, bad_url = metrics_url(metrics_server(good)), metrics_url(metrics_server(bad))
    logs: list[str] = []
    poller = ServerPoller(bad_url, tmp_path / "a.jsonl", timeout_s=1, log=logs.append)
    assert poller.scrape_once() is None
    poller.url = good_url
    assert poller.scrape_once() is not None and poller.scrape_once() is not None
    assert len(logs) == 2 and "not observable" in logs[0], logs
    assert logs[1] == (
        f"swarm: server metrics at {good_url} answered a usable scrape after all: the diagnosis uses "
        "the scrapes it could read"
    )
    logs.clear()
    poller = ServerPoller(good_url, tmp_path / "b.jsonl", timeout_s=1, log=logs.append)
    assert poller.scrape_once() is not None
    poller.url = bad_url
    assert poller.scrape_once() is None and poller.scrape_once() is None
    assert len(logs) == 1 and "stopped answering" not in logs[0], logs
    assert (
        f"at {bad_url}: a scrape after 1 usable scrape(s) could not be used (not usable Prometheus text"
        in logs[0]
    )
