"""swarm/orchestrate/processes.py with real child processes: the load generator is stopped before
the servers, a process that ignores SIGTERM is killed after the grace, logs are shown safely; the
ports picked for children lie outside the kernel's ephemeral range and are free."""

from __future__ import annotations

import os
import random
import signal
import socket
import sys
import time
from pathlib import Path

from swarm.orchestrate import processes
from swarm.orchestrate.processes import Processes, free_port, wait_http

# a child that says it is ready, and on SIGTERM takes `linger` s, then writes the monotonic clock
# (system-wide on Linux) at which it goes into a file of its own
CHILD = """
import signal, sys, time
out, linger = sys.argv[1], float(sys.argv[2])
def term(*_):
    time.sleep(linger)
    with open(out, "w") as f:
        f.write(repr(time.monotonic()))
    sys.exit(0)
signal.signal(signal.SIGTERM, term if linger >= 0 else signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""


def _start(procs: Processes, name: str, tmp: Path, linger: float, *, server: bool = False) -> None:
    procs.start(
        name,
        [sys.executable, "-c", CHILD, str(tmp / f"{name}.end"), str(linger)],
        dict(os.environ),
        server=server,
    )


def _ready(procs: Processes, *names: str) -> None:
    deadline = time.monotonic() + 60
    while not all("ready" in procs.log_tail(n) for n in names):
        assert time.monotonic() < deadline, [procs.log_tail(n) for n in names]
        time.sleep(0.05)


def test_the_load_generator_is_stopped_before_the_server(tmp_path):
    procs = Processes(tmp_path)
    _start(procs, "sim", tmp_path, 0.0, server=True)
    _start(procs, "master", tmp_path, 0.5)  # takes half a second to finish its requests
    _ready(procs, "sim", "master")
    procs.stop_all(grace_s=30)
    master_end = float((tmp_path / "master.end").read_text())
    sim_end = float((tmp_path / "sim.end").read_text())
    assert sim_end > master_end  # the server got its SIGTERM only once the master had gone
    assert procs.get("sim").returncode == 0 and procs.get("master").returncode == 0
    assert [n for n, _ in procs.named("ma")] == ["master"] and procs.get("worker") is None


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    procs = Processes(tmp_path)
    _start(procs, "stuck", tmp_path, -1.0)
    _ready(procs, "stuck")
    assert not procs.wait_exit(["stuck"], timeout_s=0.2)
    procs.stop_all(grace_s=0.5)
    assert procs.get("stuck").returncode == -signal.SIGKILL


def test_a_dead_server_is_not_waited_for_and_its_log_is_printable(tmp_path):
    procs = Processes(tmp_path)
    p = procs.start(
        "target",
        [sys.executable, "-c", "print('model \\x1b[2J gone'); raise SystemExit(3)"],
        dict(os.environ),
    )
    assert procs.wait_exit(["target"], timeout_s=60) and p.returncode == 3
    t = time.monotonic()
    assert not wait_http(f"http://127.0.0.1:{free_port()}/health", p, timeout_s=60)
    assert time.monotonic() - t < 30  # gave up because the process is gone, not at the timeout
    assert procs.log_tail("target") == "model \\x1b[2J gone\n" and procs.log_tail("nothing") == ""


class Draws(random.Random):
    """randrange gives these offsets in turn (into the spans 20000-32767, then 61000-65535)."""

    def __init__(self, offsets: list[int]) -> None:
        super().__init__(0)
        self.offsets = offsets

    def randrange(self, *_args, **_kw) -> int:
        return self.offsets.pop(0)


def test_a_picked_port_is_outside_the_ephemeral_range_and_free(tmp_path, monkeypatch):
    low, high = processes._ephemeral_range()
    picked = {free_port() for _ in range(200)}
    assert all(processes.LOWEST_PICKED <= p < low or high < p <= 65535 for p in picked), sorted(picked)
    assert len(picked) > 150  # drawn, not a fixed few
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", ranges)
    # offsets 0 and 12767 are the first span's ends, 12768 the second span's first port
    assert [free_port(rng=Draws([o])) for o in (0, 12767, 12768, 17303)] == [20000, 32767, 61000, 65535]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        ranges.write_text(f"{taken + 1} 65535\n")  # the held port is the first span's last
        assert free_port(rng=Draws([taken - 20000, 0])) == 20000  # a port in use is drawn again
    ranges.write_text("1024 65535\n")  # no room outside: the kernel's choice
    assert 1024 <= free_port(rng=Draws([])) <= 65535
