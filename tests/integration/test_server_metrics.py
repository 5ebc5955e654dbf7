"""The server-metrics poller against a live simulator (a process); parsing is tested in
tests/unit/analysis/test_server_metrics.py, the poller against in-process servers in
tests/unit/orchestrate/test_pollers.py."""

from __future__ import annotations

import threading

import pytest

from swarm.analysis.server_metrics import metrics_url, read_snapshots
from swarm.orchestrate.pollers import ServerPoller
from tests.helpers.support import sim_server

pytestmark = pytest.mark.serial


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
