"""/metrics on its own port: served from the registry, a busy port refused with a usage error."""

from __future__ import annotations

import socket
import urllib.request

import psutil
import pytest
from prometheus_client import CollectorRegistry, Counter

from swarm.core.errors import UsageError
from swarm.live import serving


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_served_on_the_port():
    registry = CollectorRegistry()
    Counter("swarm_test_things", "things", registry=registry).inc(3)
    port = _free_port()
    serving.start_prometheus_server(port, registry)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "swarm_test_things_total 3.0" in body


def test_a_busy_port_is_a_usage_error():
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UsageError, match=f"--prometheus-port {port}"):
            serving.start_prometheus_server(port, CollectorRegistry())


@pytest.mark.parametrize("host, listens_on", [("127.0.0.1", "127.0.0.1"), ("", "0.0.0.0")])
def test_the_port_listens_on_the_host_given(host, listens_on):
    """`swarm run`'s master passes 127.0.0.1 (issue 41); a plain Locust master keeps every interface."""
    port = _free_port()
    serving.start_prometheus_server(port, CollectorRegistry(), host)
    (listening,) = [
        c.laddr.ip
        for c in psutil.Process().net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listening == listens_on
