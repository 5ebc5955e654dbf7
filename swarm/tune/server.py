"""One configuration's server for `swarm tune`: started under its guardian (orchestrate/guard.py,
through processes.py's spawn_guarded: nothing the serve command starts outlives the configuration
or the tune, a daemonised server or one that ignores SIGTERM included; a server left running by a
serve command that exits is followed and said so), its /health awaited for a bounded time, stopped
cleanly (SIGTERM, then SIGKILL after a bound). Its prefix cache is emptied before each run where it
offers that (swarm/core/prefix_cache.py, shared with --reset-prefix-cache).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from swarm.core.errors import TargetError
from swarm.orchestrate import serverproc
from swarm.orchestrate.processes import spawn_guarded, stop_guarded

STOP_GRACE_S = 30.0
TAIL_LINES = 30


class ServerFailed(Exception):
    """The server exited or never answered /health: `reason` in one line, `log_tail` its log's end."""

    def __init__(self, reason: str, log_tail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


@dataclass
class Server:
    popen: subprocess.Popen
    url: str
    log: Path
    grace_s: float = STOP_GRACE_S  # the guardian's, from SIGTERM to SIGKILL
    note: Path | None = None  # where the guardian says it followed what the serve command left

    def tail(self) -> str:
        return serverproc.log_tail(self.log, TAIL_LINES)

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        stop_guarded(self.popen, self.grace_s)

    def followed(self) -> str | None:
        """The guardian's line when the serve command exited and left its server running, else None."""
        if self.note is None or not self.note.exists():
            return None
        return self.note.read_text(errors="replace").strip() or None


def start(
    cmd: list[str], url: str, log: Path, health_timeout_s: float, grace_s: float = STOP_GRACE_S
) -> Server:
    """Start `cmd` (its output to `log`) and wait until `url`/health answers 200. ServerFailed (the
    server stopped) when it exits or does not answer in time."""
    note = log.with_suffix(".followed")
    try:
        popen = spawn_guarded(cmd, log, {**os.environ, "PYTHONUNBUFFERED": "1"}, grace_s=grace_s, note=note)
    except OSError as e:
        raise ServerFailed(f"could not start {cmd[0]}: {e.strerror or e}", "") from None
    server = Server(popen, url, log, grace_s, note)
    try:
        serverproc.wait_ready(url, popen, log, health_timeout_s, name="the server")
    except TargetError as e:
        server.stop()
        raise ServerFailed(str(e).splitlines()[0].split("; log ")[0], server.tail()) from None
    except BaseException:
        server.stop()
        raise
    return server
