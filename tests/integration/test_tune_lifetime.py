"""No server outlives `swarm tune`, whatever the serve command does (issue 41): a wrapper that
daemonises its server (a double fork into a session of its own, then exit 0) and one that ignores
SIGTERM above a server that ignores it too, in a session of its own. After a normal end, Ctrl-C,
SIGTERM and SIGKILL of the command that started them, no process of the tree is left: each one is
found by a marker in its environment (/proc/PID/environ).

The signal matrix runs the tune's own server layer (swarm/tune/server.py: start, stop in a
`finally`, SIGTERM raised as Ctrl-C, as swarm/tune/run.py's measure does) in a small driver process
against a tiny HTTP server; the whole `swarm tune` runs the daemonising wrapper around the embedded
simulator, to its end and to a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers.support import free_port, start, swarm_cmd, wait_for

pytestmark = pytest.mark.integration

MARKER = "SWARM_LIFETIME_MARKER"
GRACE_S = 0.5  # the server's SIGTERM to SIGKILL in the driver

DAEMONISING = """#!/bin/sh
# the server double-forked into a session of its own; the wrapper exits 0 at once
( setsid "$@" </dev/null >/dev/null 2>&1 & )
exit 0
"""
TERM_DEAF = """#!/bin/sh
# deaf to SIGTERM, and so is its server (the ignore is inherited), in a session of its own
trap '' TERM
setsid "$@" &
wait $!
"""
WRAPPERS = {"daemonising": DAEMONISING, "term-deaf": TERM_DEAF}

# a server that answers /health (and ignores SIGTERM when its wrapper does)
SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

# what swarm/tune/run.py's measure does with a configuration's server
DRIVER = """
import contextlib, sys, time
from pathlib import Path
from swarm.orchestrate.processes import sigterm_as_interrupt
from swarm.tune import server
url, log, grace, hold, cmd = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
with sigterm_as_interrupt(), contextlib.suppress(KeyboardInterrupt):
    s = server.start(cmd, url, log, 30, grace_s=grace)
    try:
        print("ready", flush=True)
        time.sleep(hold)
    finally:
        s.stop()
print("stopped", flush=True)
"""


def marked(marker: str) -> list[str]:
    """The living processes whose environment holds `marker`, as "pid: command line"."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # gone meanwhile
            continue
        if needle in environ.split(b"\0"):
            found.append(f"{pid}: {cmdline.decode(errors='replace')}")
    return found


def all_gone(marker: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (left := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running {timeout_s:.0f} s after the end:\n" + "\n".join(left)


@pytest.fixture
def marker():
    """A marker for the test's processes; any left at the end SIGKILLed, so a failure leaves nothing."""
    value = uuid.uuid4().hex
    yield value
    for line in marked(value):
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def wrapper(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.sh"
    path.write_text(WRAPPERS[kind])
    return path


@pytest.mark.parametrize("ending", ["end", "SIGINT", "SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_no_process_of_a_configurations_server_outlives_it(tmp_path, marker, kind, ending):
    port = free_port()
    serve = ["sh", str(wrapper(tmp_path, kind)), sys.executable, "-c", SERVER, str(port)]
    hold = "0" if ending == "end" else "60"
    driver = [sys.executable, "-c", DRIVER, f"http://127.0.0.1:{port}", str(tmp_path / "server.log")]
    env = {MARKER: marker}
    with start([*driver, str(GRACE_S), hold, *serve], tmp_path / "driver.log", env) as proc:
        wait_for(lambda: "ready" in proc.output(), 30, "the server's /health")
        if ending != "end":
            proc.signal(getattr(signal, ending))  # the driver's own session: Ctrl-C reaches it alone
        proc.wait(timeout=30)
        if ending != "SIGKILL":
            assert "stopped" in proc.output(), proc.output()
    all_gone(marker, GRACE_S + 5)
    if kind == "daemonising":  # its serve command exited at once: the server was followed, and said so
        assert "followed as the server" in (tmp_path / "server.log").read_text()


FAST = ["--sweep", "2", "--stage-time", "1s", "--workload", "short_qa", "--max-tokens", "8", "--workers", "1"]


@pytest.mark.parametrize("ending", ["end", "SIGKILL"])
def test_a_daemonised_simulator_is_followed_and_stopped_with_the_tune(tmp_path, marker, ending):
    out = tmp_path / "tune"
    serve = f"sh {wrapper(tmp_path, 'daemonising')} {sys.executable} -m swarm sim --profile instant"
    with start(swarm_cmd("tune", "--serve-cmd", serve, "--out", str(out), *FAST), tmp_path / "tune.log",
               {MARKER: marker}) as proc:  # fmt: skip
        if ending == "SIGKILL":
            wait_for(lambda: "swarm: run " in proc.output(), 60, "the configuration's run")
            proc.signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == (-signal.SIGKILL if ending == "SIGKILL" else 0), proc.output()[-3000:]
    all_gone(marker, 10)
    if ending == "end":
        (config,) = json.loads((out / "tune.json").read_text())["configs"]
        assert config["status"] == "ok", config
        assert "exited with code 0 and left processes running" in (config["note"] or ""), config
