"""A server command's guardian (swarm/orchestrate/guard.py) run as the tune runs it: the serve
command's exit code is its own, a process the command leaves running is followed (and said so) until
it ends, nothing starts when its parent has gone, and /proc gives every descendant. The stop on a
signal or a parent's death: tests/integration/test_tune_lifetime.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from swarm.orchestrate import guard
from swarm.orchestrate.processes import GUARD


def guarded(cmd: list[str], note: str = "", parent: int | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-I", "-S", str(GUARD), "1", str(parent or os.getpid()), note, "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_the_serve_commands_exit_code_is_the_guardians():
    assert guarded(["sh", "-c", "exit 3"]).returncode == 3
    assert guarded(["sh", "-c", "kill -9 $$"]).returncode == 128 + 9  # killed by a signal


def test_what_the_command_leaves_running_is_followed_until_it_ends(tmp_path):
    note = tmp_path / "note"
    t0 = time.monotonic()
    p = guarded(["sh", "-c", "(setsid sleep 0.5 &); exit 0"], str(note))
    assert p.returncode == 0 and time.monotonic() - t0 >= 0.5  # the daemon's life, not the command's
    assert "exited with code 0 and left processes running" in note.read_text()
    assert "followed as the server" in p.stdout


def test_what_a_failed_command_leaves_is_stopped_at_once():
    t0 = time.monotonic()
    p = guarded(["sh", "-c", "(setsid sleep 30 &); exit 4"])
    assert p.returncode == 4 and time.monotonic() - t0 < 10  # not the 30 s of its leftover
    assert "exited with code 4: stopping what it left" in p.stdout


def test_nothing_starts_when_its_parent_has_gone(tmp_path):
    p = guarded(["touch", str(tmp_path / "started")], parent=1)
    assert p.returncode == 128 + 15 and not (tmp_path / "started").exists()


# a parent that starts the guardian without asking for its death signal, prints its pid, and waits
PARENT = """
import os, subprocess, sys, time
argv = [sys.executable, "-I", "-S", sys.argv[1], "5", str(os.getpid()), "", "--", "sleep", "60"]
g = subprocess.Popen(argv)
time.sleep(0.3)
print(g.pid, flush=True)
time.sleep(60)
"""


def test_a_parent_that_dies_without_a_signal_is_seen_and_the_tree_stopped():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(GUARD)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    guardian = int(parent.stdout.readline())
    (server,) = guard.descendants(guardian)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{server}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{server}"), "the server outlived its guardian's parent"


def test_a_command_that_cannot_start_is_one_line():
    p = guarded(["/no/such/server"])
    assert p.returncode == guard.NOT_STARTED
    assert p.stderr.strip() == "swarm guard: could not start /no/such/server: No such file or directory"


def test_descendants_are_found_below_living_parents():
    p = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30"])
    try:
        deadline = time.monotonic() + 10
        while len(guard.descendants(p.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        below = guard.descendants(p.pid)
        assert len(below) == 2 and p.pid in guard.descendants(os.getpid())
        assert set(below) <= set(guard.descendants(os.getpid()))
    finally:
        guard.signal_all([*guard.descendants(p.pid), p.pid], 9)
        p.wait()


def test_usage():
    assert guard.main(["1", "--", "x"]) == 2
