"""Helpers for tests that start real processes (simulator, locust, prometheus, chromium).

Every process is started in its own session, its output goes to a log file, and it is killed
(whole process group) when the context exits, so a failing test never leaves servers behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from swarm.orchestrate import processes

# the product's own pick (outside the kernel's ephemeral range): the tests' servers race the same connections
from swarm.orchestrate.processes import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"  # recorded scrapes and runs
HELPERS = Path(__file__).resolve().parent  # the test locustfiles and fault servers are run by path
BIN = Path(sys.executable).parent


def wait_http(
    url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None, log: Path | None = None
) -> None:
    """Wait until `url` answers (the product's wait), or fail with the process's log tail."""
    if processes.wait_http(url, proc, timeout):
        return
    if proc is not None and proc.poll() is not None:
        why = f"its process exited with code {proc.returncode}"
    else:
        why = f"not ready after {timeout}s"
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"{url}: {why}; log tail:\n{tail}")


@dataclass
class Proc:
    popen: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)


@contextlib.contextmanager
def start(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = REPO) -> Iterator[Proc]:
    """Start `cmd` as the swarm starts its children (processes.spawn: its own session, dying with
    the tests); its group stopped on exit (SIGTERM, SIGKILL after 10 s)."""
    p = processes.spawn(cmd, log, {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, cwd=cwd)
    try:
        yield Proc(p, log)
    finally:
        processes.stop([p], 10.0)


def wait_for(predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.2) -> None:
    """Poll `predicate` until it is true; fail after `timeout` s, naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def swarm_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "swarm", *args]


@dataclass
class Sim:
    url: str  # e.g. http://127.0.0.1:PORT
    proc: Proc
    trace: Path | None

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.read()

    def metrics_text(self) -> str:
        return self.get("/metrics", timeout=5).decode()


def listening_inode(port: int) -> str | None:
    """The socket inode listening on loopback TCP `port` (/proc/net/tcp, tcp6); None if none is."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    return fields[9]
    return None


def owns_socket(pid: int, inode: str) -> bool:
    """Whether process `pid` holds socket `inode` among its file descriptors."""
    want = f"socket:[{inode}]"
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                    return True
    return False


def serves_on(pid: int, port: int) -> bool:
    """Whether process `pid` is the one listening on loopback TCP `port` (True where /proc does not
    say: then /health answering is all there is to go by)."""
    if not os.path.exists("/proc/net/tcp"):
        return True
    inode = listening_inode(port)
    return inode is not None and owns_socket(pid, inode)


SIM_START_TRIES = 3


@contextlib.contextmanager
def sim_server(tmp_path: Path, *args: str, trace: bool = True, model: str = "sim-model") -> Iterator[Sim]:
    """Start `swarm sim` on a free loopback port with extra CLI `args`; yields a `Sim`.

    Ready once /health answers AND the listening socket is the simulator's own: a free port can be
    taken between the pick and the bind by another test's server, which then answers /health in the
    simulator's place (ci24: the simulator exited "address already in use" and the run talked to a
    server that said 405 to every POST). Then the simulator is started again on another port."""
    for attempt in range(1, SIM_START_TRIES + 1):
        port = free_port()
        trace_path = tmp_path / f"sim-trace-{port}.jsonl" if trace else None
        cmd = swarm_cmd("sim", "--host", "127.0.0.1", "--port", str(port), "--model", model, *args)
        if trace_path:
            cmd += ["--trace", str(trace_path)]
        with start(cmd, tmp_path / f"sim-{port}.log") as proc:
            url = f"http://127.0.0.1:{port}"

            deadline = time.monotonic() + 30
            while (
                proc.popen.poll() is None
                and time.monotonic() < deadline
                and not serves_on(proc.popen.pid, port)
            ):
                time.sleep(0.05)
            if (
                proc.popen.poll() is not None
                and attempt < SIM_START_TRIES
                and "already in use" in proc.output()
            ):
                continue  # the port was taken between the pick and the bind: another one
            wait_http(
                url + "/health", timeout=max(1.0, deadline - time.monotonic()), proc=proc.popen, log=proc.log
            )
            if not serves_on(proc.popen.pid, port):
                raise RuntimeError(f"{url}: answered, but not by the simulator (pid {proc.popen.pid})")
            yield Sim(url, proc, trace_path)
            return
