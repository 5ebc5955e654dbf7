"""Client CPU: measured once (each load-generating process's own CPU time per stage) and judged once.

A load generator above ~90% of a core measures its own queueing, not the server: such a stage is
*client-bound* and its latencies are not trusted. Each worker (or local runner) meters its CPU
per stage with `CpuMeter` (`time.process_time()`, all threads) and ships `[[stage, cpu_s,
wall_s]]` with every report (swarm/stats/wire.py). The master adds them to a `ClientLoad`, which
says live which stages were client-bound (log line, web UI, summary.json `client_bound`) and is
written to the run directory as `client_cpu.jsonl` (one line per report entry), from which the
report rebuilds the same `ClientLoad`: one measurement, one judgement, live and after the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

CLIENT_CPU_MAX = 90.0  # percent of one core, per worker process
CPU_MIN_WALL_S = 2.0  # a (stage, worker) needs this much metered time before it can be judged
LIMIT_ENV = "SWARM_CLIENT_CPU_MAX"


def cpu_limit() -> float:
    """The bar: CLIENT_CPU_MAX, or $SWARM_CLIENT_CPU_MAX (a stricter one, or a low one to see the
    flag on a machine too busy to give a worker 90% of a core)."""
    return float(os.environ.get(LIMIT_ENV) or CLIENT_CPU_MAX)


class CpuMeter:
    """This process's CPU time per load stage, from `time.process_time()` (all threads)."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), time.process_time())
        self.pending: dict[int, list[float]] = {}  # stage -> [cpu_s, wall_s] since the last take()

    def sample(self, stage: int | None) -> None:
        """Count the time since the last sample to `stage` (None: not running, not counted)."""
        now = (time.monotonic(), time.process_time())
        wall, cpu = now[0] - self._last[0], now[1] - self._last[1]
        self._last = now
        if stage is not None and wall > 0:
            acc = self.pending.setdefault(stage, [0.0, 0.0])
            acc[0] += cpu
            acc[1] += wall

    def take(self) -> list[list[float]]:
        """[[stage, cpu_s, wall_s]] since the last take (msgpack-able), and start afresh."""
        out = [[stage, cpu, wall] for stage, (cpu, wall) in self.pending.items()]
        self.pending = {}
        return out


class ClientLoad:
    """CPU and wall seconds per (stage, worker); which stages were client-bound."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[int, str], list[float]] = {}

    def add(self, worker: str, entries: Iterable[Any] | None) -> None:
        """`entries`: [[stage, cpu_s, wall_s]], as `CpuMeter.take` gives them."""
        for stage, cpu, wall in entries or ():
            acc = self.seconds.setdefault((int(stage), str(worker)), [0.0, 0.0])
            acc[0] += float(cpu)
            acc[1] += float(wall)

    def _percents(self, min_wall_s: float) -> Iterable[tuple[int, str, float]]:
        for (stage, worker), (cpu, wall) in self.seconds.items():
            if wall >= min_wall_s and wall > 0:
                yield stage, worker, 100.0 * cpu / wall

    def bound(self, limit: float | None = None) -> dict[int, tuple[str, float]]:
        """stage -> (worker, mean CPU %) of its busiest worker, for stages where one averaged above
        `limit` (default `cpu_limit()`) over at least CPU_MIN_WALL_S."""
        bar = cpu_limit() if limit is None else limit
        out: dict[int, tuple[str, float]] = {}
        for stage, worker, pct in self._percents(CPU_MIN_WALL_S):
            if pct > bar and (stage not in out or pct > out[stage][1]):
                out[stage] = (worker, pct)
        return out

    def by_stage(self) -> dict[int, float]:
        """stage -> the busiest worker's mean CPU % in it (any metered time)."""
        out: dict[int, float] = {}
        for stage, _worker, pct in self._percents(0.0):
            out[stage] = max(pct, out.get(stage, pct))
        return out

    def busiest(self) -> float | None:
        """The highest mean CPU % of any (stage, worker) with enough time, or None."""
        return max((pct for _, _, pct in self._percents(CPU_MIN_WALL_S)), default=None)

    @staticmethod
    def lines(worker: str, entries: Iterable[Any], ts: float) -> list[dict[str, Any]]:
        """client_cpu.jsonl lines for one report's entries."""
        return [
            {"ts": ts, "worker": str(worker), "stage": int(s), "cpu_s": float(c), "wall_s": float(w)}
            for s, c, w in entries
        ]

    @classmethod
    def from_lines(cls, lines: Iterable[Mapping[str, Any]]) -> ClientLoad:
        """Rebuilt from client_cpu.jsonl lines (other lines are skipped)."""
        load = cls()
        for d in lines:
            if {"worker", "stage", "cpu_s", "wall_s"} <= d.keys():
                load.add(str(d["worker"]), [[d["stage"], d["cpu_s"], d["wall_s"]]])
        return load

    def __bool__(self) -> bool:
        return bool(self.seconds)
