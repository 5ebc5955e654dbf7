"""The server-metrics poller against a live simulator (a process); parsing and the poller against
in-process servers are in tests/unit/analysis/test_server_metrics.py."""

from __future__ import annotations

import threading

import pytest

from swarm.analysis.server_metrics import ServerPoller, metrics_url, read_snapshots
from tests.helpers.support import sim_server


@pytest.mark.integration
def test_poller_against_a_live_simulator(tmp_path):
    with sim_server(tmp_path, trace=False, model="m") as sim:
        out = tmp_path / "server_metrics.jsonl"
        poller = ServerPoller(metrics_url(sim.url), out, interval_s=0.1, model="m").start()
        threading.Event().wait(0.5)
        poller.stop()
    snaps = read_snapshots(out)
    assert poller.error is None and len(snaps) >= 3
    assert snaps[0].source == "vllm" and snaps[0].model == "m" and snaps[0].running == 0
