"""A worker that is still starting when the run ends does not fail the run.

Locust's WorkerRunner runs its message loop while its constructor waits for the master's ack; a
`quit` that arrives then makes it send a last report before Locust registered the listener that
adds `user_classes_count` (and before the swarm's, which adds its delta): a report with only
`stats`, `stats_total` and `errors`. Locust's master handler raised KeyError on it and the run
exited 2. Seen with 24 real workers on a starved 2-core machine, the last ones still starting
when the run ended (the master's log then named exactly those keys).

That window is a few milliseconds wide on an idle machine, so the worker that lands in it here is
a stand-in at the protocol level: a ZeroMQ DEALER socket speaking Locust's messages (msgpack
`(type, data, node_id)`, as benchmarks/master_scale.py's fake workers do) that says
`client_ready` and then sends that report, beside a real worker that does the run's work.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from swarm.orchestrate.commands import locust_command
from tests.helpers.support import free_port, sim_server, start, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def keyless_report() -> dict:
    """What such a worker sends: Locust's own stats fields (made by Locust's code), nothing more."""
    from locust.stats import RequestStats

    return {"stats": [], "stats_total": RequestStats().total.get_stripped_report(), "errors": {}}


def test_a_report_without_user_classes_count_does_not_fail_the_run(tmp_path: Path) -> None:
    import locust

    port = free_port()
    locust_cmd = locust_command()
    with sim_server(tmp_path, "--profile", "instant", trace=False) as sim:
        common = ["--host", sim.url, "--workload", "short_qa", "--max-tokens", "8"]
        common += ["--swarm-out", str(tmp_path / "run"), "--run-id", "late-quit"]
        master_cmd = [*locust_cmd, "--master", "--headless", "--master-bind-host", "127.0.0.1"]
        master_cmd += ["--master-bind-port", str(port), "--expect-workers", "1", "-u", "2", "-t", "12s"]
        master_cmd += ["--stop-timeout", "5s"]
        worker_cmd = [*locust_cmd, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
        with contextlib.ExitStack() as stack:
            master = stack.enter_context(start([*master_cmd, *common], tmp_path / "master.log"))
            stack.enter_context(start([*worker_cmd, *common], tmp_path / "worker-0.log"))
            wait_for(lambda: "1 workers connected" in master.output(), 60, "the real worker")
            sock = zmq.Context.instance().socket(zmq.DEALER)
            stack.callback(sock.close, 0)
            sock.setsockopt(zmq.IDENTITY, b"starting-worker")
            sock.connect(f"tcp://127.0.0.1:{port}")
            sock.send(msgpack.packb(("client_ready", locust.__version__, "starting-worker")))
            wait_for(lambda: "2 workers connected" in master.output(), 30, "the starting worker")
            sock.send(msgpack.packb(("stats", keyless_report(), "starting-worker")))
            time.sleep(1.0)
            code = master.wait(timeout=90)
            out = master.output()
    assert "KeyError" not in out, out[-3000:]
    assert code == 0, out[-3000:]
