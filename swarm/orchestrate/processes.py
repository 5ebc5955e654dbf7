"""The processes one command starts (simulator, master, workers, a real server): started in sessions
of their own, logged to files, and all stopped on exit, whatever happens."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """The processes one run started; all of them are stopped on exit, whatever happens."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.out / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        self.procs.append((name, p))
        return p

    def log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.out / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_all(self, grace_s: float = 10.0) -> None:
        for _, p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for _, p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)


def wait_http(url: str, proc: subprocess.Popen, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
