"""The processes one command starts (simulator, master, workers, a real server): started in sessions
of their own, logged to files, stopped on exit whatever happens, and never outliving the command.

A child is in a session of its own (a terminal's Ctrl-C reaches the command alone, which then stops
its children in order), so a command killed outright (SIGKILL, the OOM killer) could leave them
running: a master and workers loading the server for the rest of `-t`, a simulator up for good.
Each child therefore asks the kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`, set
between fork and exec): a Locust master or worker then stops as on any SIGTERM (no new requests,
the ones in flight recorded), a simulator exits.

That signal reaches the direct child alone: a server command that daemonises (`nohup ... &`, a
double fork, setsid) or ignores SIGTERM would outlive the command. `swarm tune`'s servers therefore
run under a guardian (guard.py: `spawn_guarded`, `stop_guarded`), the subreaper of all they start.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from swarm.core.terminal import printable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the parent: the child, between fork and exec, only calls it."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal; stop_all still runs on exit
        return None


_PRCTL = _load_prctl()


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child sent SIGTERM when the process that started it dies; None
    where the kernel has no such thing. Called in the child before exec: nothing but two syscalls."""
    if _PRCTL is None:
        return None
    parent = os.getpid()
    prctl = _PRCTL

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED = 20000  # below it the well-known services' ports (8000, 8080, 9090, ...)
PICK_TRIES = 64


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default 32768-60999)."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Nothing holds `port` on `host`: a bind there succeeds."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """A port nothing listens on, for a child to bind a moment later: drawn outside the kernel's
    ephemeral range, so no outgoing connection can take it in between (the load's own thousands of
    connections draw their local ports from that range: a port picked there by binding port 0 was
    taken by one of them before the master could serve /metrics on it); the kernel's choice when the
    range leaves no room."""
    draw = rng or random.SystemRandom()
    low, high = _ephemeral_range()
    spans = [(a, b) for a, b in ((LOWEST_PICKED, low - 1), (high + 1, 65535)) if a <= b]
    room = sum(b - a + 1 for a, b in spans)
    for _ in range(PICK_TRIES if room else 0):
        port = draw.randrange(room)  # uniform over both spans
        for a, b in spans:
            if port <= b - a:
                port += a
                break
            port -= b - a + 1
        if port_free(port, host):
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Processes:
    """The processes one run started; all of them are stopped on exit, whatever happens.

    Servers (the embedded simulator) are stopped after everything else has gone: a stop must not
    cut the requests the load generator is still allowed to finish."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.servers: set[str] = set()

    def start(
        self, name: str, cmd: list[str], env: dict[str, str], *, server: bool = False
    ) -> subprocess.Popen:
        p = spawn(cmd, self.out / f"{name}.log", env)
        self.procs.append((name, p))
        if server:
            self.servers.add(name)
        return p

    def get(self, name: str) -> subprocess.Popen | None:
        return next((p for n, p in self.procs if n == name), None)

    def named(self, prefix: str) -> list[tuple[str, subprocess.Popen]]:
        return [(n, p) for n, p in self.procs if n.startswith(prefix)]

    def log_tail(self, name: str, chars: int = 2000) -> str:
        """The end of a process's log, for the operator's terminal: a log holds what a target said
        (error bodies, model names), so its control characters are written out (core/terminal.py)."""
        path = self.out / f"{name}.log"
        return printable(path.read_text(errors="replace")[-chars:], lines=True) if path.exists() else ""

    def wait_exit(self, names: list[str], timeout_s: float) -> bool:
        """Wait up to `timeout_s` for these processes to exit on their own; True if they all did."""
        deadline = time.monotonic() + timeout_s
        for n, p in self.procs:
            if n in names:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    return False
        return True

    def signal(self, name: str, sig: int) -> None:
        p = self.get(name)
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, sig)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM (then, after `grace_s`, SIGKILL) everything still running: the load generator
        first, the servers once it has gone."""
        clients = [p for n, p in self.procs if n not in self.servers]
        servers = [p for n, p in self.procs if n in self.servers]
        for wave in (clients, servers):
            stop(list(reversed(wave)), grace_s)


# ---- one child's life: started, awaited, stopped (the swarm's children, the servers `swarm tune`
# and `swarm target` start, and the tests' helpers all go through these three)


def spawn(
    cmd: Sequence[str], log: Path, env: Mapping[str, str] | None = None, *, cwd: Path | None = None
) -> subprocess.Popen:
    """`cmd` started in a session of its own (a terminal's Ctrl-C reaches this command alone, which
    stops its children in order), asking for SIGTERM when this process dies (`die_with_parent`),
    its stdout and stderr into `log`, no stdin; `env` None: this process's. OSError when it cannot
    be started."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        return subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )


def stop(procs: Sequence[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM to each one's process group, then SIGKILL to every group still running `grace_s`
    later (the grace runs for all of them at once)."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


GUARD = Path(__file__).with_name("guard.py")  # run by path: stdlib only, no swarm import to pay for
GUARD_MARGIN_S = 10.0  # past a guardian's grace, for it to reap its tree and exit before it is killed


def spawn_guarded(
    cmd: Sequence[str], log: Path, env: Mapping[str, str] | None, *, grace_s: float, note: Path
) -> subprocess.Popen:
    """`cmd` started as `spawn` does, under its guardian (guard.py): nothing it starts outlives this
    command or `stop_guarded`, a daemon or a setsid'd process included; one that runs on after `cmd`
    exits is followed (the Popen runs until all are gone) and `note` gets a line saying so. OSError
    when `cmd` cannot be found."""
    path = (os.environ if env is None else env).get("PATH")
    if shutil.which(cmd[0], path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
    note.unlink(missing_ok=True)
    guard = [sys.executable, "-I", "-S", str(GUARD), repr(grace_s), str(os.getpid()), str(note), "--"]
    return spawn([*guard, *cmd], log, env)


def stop_guarded(p: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the guardian alone (it signals each process of its tree once: a second SIGTERM
    makes some servers, llama-server's, quit at once), which SIGKILLs what is left after the
    `grace_s` it was started with; its group SIGKILLed if it has not gone `GUARD_MARGIN_S` later."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=grace_s + GUARD_MARGIN_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def wait_http(url: str, proc: subprocess.Popen | None, timeout_s: float) -> bool:
    """True once GET `url` answers (2xx), False when `proc` exits first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return False


@contextlib.contextmanager
def sigterm_as_interrupt(first: Callable[[], None] | None = None) -> Iterator[None]:
    """SIGTERM raised as KeyboardInterrupt in the block (the same stop path as Ctrl-C); `first`,
    when given, runs before it is raised (e.g. to hand the signal on to a child)."""

    def handler(signum, frame):
        if first is not None:
            first()
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
