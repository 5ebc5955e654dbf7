"""A test server as a child process on loopback: wait for its /health, show its log tail, stop it.

Shared by `swarm target vllm-cpu` (swarm/orchestrate/targets.py) and `swarm target llamacpp`
(swarm/orchestrate/llamacpp.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from swarm.core.errors import TargetError

HOST = "127.0.0.1"  # never anything else: a test server with random weights is nobody's service
SERVED_MODEL = "tiny-qwen2"


def log_tail(path: Path, lines: int = 60) -> str:
    """The end of the server's log, without the route table vLLM prints at start-up."""
    if not path.exists():
        return "(no log)"
    kept = [line for line in path.read_text(errors="replace").splitlines() if "Route: " not in line]
    return "\n".join(kept[-lines:])


def wait_ready(url: str, popen: subprocess.Popen, log: Path, timeout_s: float, name: str = "vLLM") -> float:
    """Seconds until GET url/health answered 200; TargetError with the log tail otherwise."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise TargetError(
                f"{name} exited with code {popen.returncode} while starting; log {log}:\n{log_tail(log)}"
            )
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise TargetError(
        f"{name} did not answer {url}/health within {timeout_s:.0f} s; log {log}:\n{log_tail(log)}"
    )


def stop(popen: subprocess.Popen, grace_s: float = 20.0) -> None:
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    try:
        popen.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=10)


def run_setup_script(script: Path, what: str, timeout_s: float, *, quiet: bool = False) -> Path:
    """Run an idempotent setup script of the repo (`bash SCRIPT`) that prints, on its last line of
    stdout, the path of what it made; return that path. `what` names it in errors ("vllm-cpu
    install", "llama-server build"). `quiet` captures stderr and puts its tail in the error.
    Raises TargetError (a timeout, a failure with its tail, no such path printed)."""
    try:
        p = subprocess.run(
            ["bash", str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if quiet else None,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise TargetError(f"{what} ({script}) took more than {timeout_s:.0f} s") from None
    if p.returncode != 0:
        tail = "\n".join((p.stderr or "").splitlines()[-40:])
        raise TargetError(f"{what} failed (exit {p.returncode}, {script}){':' if tail else ''}\n{tail}")
    lines = p.stdout.strip().splitlines()
    if not lines or not Path(lines[-1]).exists():
        raise TargetError(f"{what} ({script}) printed no path of what it made: {p.stdout[-500:]!r}")
    return Path(lines[-1])
