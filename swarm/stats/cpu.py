"""Client CPU: measured once (each load-generating process's own CPU time per stage) and judged once.

A load generator that wants ~90% of a core measures its own queueing, not the server: such a
stage is *client-bound* and its latencies are not trusted. What it wants is more than what it
got: a worker sharing its core with other busy processes (or throttled by a container's CPU
limit) may get a quarter of a core while its event loop is runnable all the time; its CPU share
reads 25% and its latencies are as untrue as a saturated one's. So the judgement is on *demand*:
CPU time (`time.process_time()`, all threads) plus the time the event loop's thread was runnable
but waiting for a CPU (the kernel's run-queue wait, /proc/self/schedstat's second field; 0 where
the kernel does not give it). Each worker (or local runner) meters both per stage with
`CpuMeter` and ships `[[stage, cpu_s, wall_s, wait_s]]` with every report
(swarm/stats/wire.py). The master adds them to a `ClientLoad`, which
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


SCHEDSTAT = "/proc/self/schedstat"  # the main thread's: ns on a CPU, ns runnable waiting, slices


def run_queue_wait_s(path: str = SCHEDSTAT) -> float:
    """Seconds this process's main thread (the event loop) has spent runnable but waiting for a
    CPU, per the kernel; 0.0 where the kernel does not say (not Linux, no schedstats)."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class CpuMeter:
    """This process's CPU time (`time.process_time()`, all threads) and its event loop's run-queue
    wait (`run_queue_wait_s`) per load stage."""

    def __init__(self, wait_source: str = SCHEDSTAT) -> None:
        self.wait_source = wait_source
        self._last = (time.monotonic(), time.process_time(), run_queue_wait_s(wait_source))
        self.pending: dict[int, list[float]] = {}  # stage -> [cpu_s, wall_s, wait_s] since take()

    def sample(self, stage: int | None) -> None:
        """Count the time since the last sample to `stage` (None: not running, not counted)."""
        now = (time.monotonic(), time.process_time(), run_queue_wait_s(self.wait_source))
        wall, cpu, wait = now[0] - self._last[0], now[1] - self._last[1], now[2] - self._last[2]
        self._last = now
        if stage is not None and wall > 0:
            acc = self.pending.setdefault(stage, [0.0, 0.0, 0.0])
            acc[0] += cpu
            acc[1] += wall
            acc[2] += max(wait, 0.0)

    def take(self) -> list[list[float]]:
        """[[stage, cpu_s, wall_s, wait_s]] since the last take (msgpack-able), and start afresh."""
        out = [[stage, cpu, wall, wait] for stage, (cpu, wall, wait) in self.pending.items()]
        self.pending = {}
        return out


class ClientLoad:
    """CPU, wall and run-queue wait seconds per (stage, worker); which stages were client-bound.
    A percentage here is *demand*: (CPU + wait) / wall, in % of one core."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[int, str], list[float]] = {}  # [cpu_s, wall_s, wait_s]

    def add(self, worker: str, entries: Iterable[Any] | None) -> None:
        """`entries`: [[stage, cpu_s, wall_s, wait_s]], as `CpuMeter.take` gives them (an older
        worker's [[stage, cpu_s, wall_s]]: no wait known, counted as 0)."""
        for stage, cpu, wall, *rest in entries or ():
            acc = self.seconds.setdefault((int(stage), str(worker)), [0.0, 0.0, 0.0])
            acc[0] += float(cpu)
            acc[1] += float(wall)
            acc[2] += float(rest[0]) if rest else 0.0

    def _percents(self, min_wall_s: float) -> Iterable[tuple[int, str, float]]:
        for (stage, worker), (cpu, wall, wait) in self.seconds.items():
            if wall >= min_wall_s and wall > 0:
                yield stage, worker, 100.0 * (cpu + wait) / wall

    def split(self, stage: int, worker: str) -> tuple[float, float]:
        """(CPU %, waiting-for-a-CPU %) of one worker in one stage: the two parts of its demand."""
        cpu, wall, wait = self.seconds.get((stage, worker), [0.0, 0.0, 0.0])
        return (100.0 * cpu / wall, 100.0 * wait / wall) if wall > 0 else (0.0, 0.0)

    def bound(self, limit: float | None = None) -> dict[int, tuple[str, float]]:
        """stage -> (worker, mean demand %) of its busiest worker, for stages where one's demand
        averaged above `limit` (default `cpu_limit()`) over at least CPU_MIN_WALL_S."""
        bar = cpu_limit() if limit is None else limit
        out: dict[int, tuple[str, float]] = {}
        for stage, worker, pct in self._percents(CPU_MIN_WALL_S):
            if pct > bar and (stage not in out or pct > out[stage][1]):
                out[stage] = (worker, pct)
        return out

    def by_stage(self) -> dict[int, float]:
        """stage -> the busiest worker's mean demand % in it (any metered time)."""
        out: dict[int, float] = {}
        for stage, _worker, pct in self._percents(0.0):
            out[stage] = max(pct, out.get(stage, pct))
        return out

    def busiest(self) -> float | None:
        """The highest mean demand % of any (stage, worker) with enough time, or None."""
        return max((pct for _, _, pct in self._percents(CPU_MIN_WALL_S)), default=None)

    @staticmethod
    def lines(worker: str, entries: Iterable[Any], ts: float) -> list[dict[str, Any]]:
        """client_cpu.jsonl lines for one report's entries."""
        return [
            {
                "ts": ts,
                "worker": str(worker),
                "stage": int(s),
                "cpu_s": float(c),
                "wall_s": float(w),
                "wait_s": float(rest[0]) if rest else 0.0,
            }
            for s, c, w, *rest in entries
        ]

    @classmethod
    def from_lines(cls, lines: Iterable[Mapping[str, Any]]) -> ClientLoad:
        """Rebuilt from client_cpu.jsonl lines (other lines are skipped)."""
        load = cls()
        for d in lines:
            if {"worker", "stage", "cpu_s", "wall_s"} <= d.keys():
                load.add(str(d["worker"]), [[d["stage"], d["cpu_s"], d["wall_s"], d.get("wait_s") or 0.0]])
        return load

    def __bool__(self) -> bool:
        return bool(self.seconds)
