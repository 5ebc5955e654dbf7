"""The workers' own CPU on the master: client-bound stages, logged once, and DIR/client_cpu.jsonl.

Adds each report's CPU entries to a `ClientLoad` (swarm/stats/cpu.py: a stage in which a worker
averaged more than 90% of a core is client-bound, logged once, shown in the LLM tab and listed in
summary.json as `client_bound`) and, with --swarm-out, appends them to DIR/client_cpu.jsonl.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any, TextIO

from swarm.core.runfiles import CLIENT_CPU
from swarm.core.units import stage_name
from swarm.stats.cpu import ClientLoad

logger = logging.getLogger(__name__)


class ClientCpu:
    """The run's client CPU: what the workers measured, the stages already flagged, the file."""

    def __init__(self, out_dir: Path | None) -> None:
        self.out_dir = out_dir
        self.load = ClientLoad()
        self._flagged: set[int] = set()  # stages already logged as client-bound
        self._file: TextIO | None = None
        self._closed = False

    def clear(self) -> None:
        """A new test in the same web UI session."""
        self.load = ClientLoad()
        self._flagged.clear()

    def add(self, worker: str, entries: Any) -> None:
        """A report's `cpu` entries (malformed ones are skipped)."""
        with contextlib.suppress(ValueError, TypeError):
            rows = entries or []
            self.load.add(worker, rows)
            self._write(worker, rows)

    def _write(self, worker: str, entries: list[list[float]]) -> None:
        if self.out_dir is None or not entries or self._closed:
            return
        if self._file is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(self.out_dir / CLIENT_CPU, "a")  # noqa: SIM115 - closed in close()
        for line in ClientLoad.lines(worker, entries, time.time()):
            self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def flag_bound(self) -> None:
        """Log each newly client-bound stage once."""
        for bound_stage, (worker, pct) in sorted(self.load.bound().items()):
            if bound_stage not in self._flagged:
                self._flagged.add(bound_stage)
                logger.warning(
                    "swarm: client-bound: %s needed %.0f%% of a core (CPU + waiting for one) in %s; "
                    "results not trustworthy (add workers or cores)",
                    worker,
                    pct,
                    stage_name(bound_stage),
                )

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None
