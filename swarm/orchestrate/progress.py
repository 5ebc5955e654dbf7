"""Live progress line for `swarm run`, read from the master's own /metrics.

Every `interval_s` it prints `stage n/N U users | elapsed/total | QPS | TTFT p99 | errors` (n
counted from 1, as every label counts stages: swarm/core/units.py `stage_name`), with
QPS and TTFT p99 over the last interval, from the master's histogram bucket deltas: the p99 is
shown as the bucket that holds it ("80-100ms"), which is as much as buckets can say.
The interval is a multiple of Locust's 3 s worker report interval, so each window holds the
same number of reports and QPS does not swing with the report phase.
It runs in a plain thread of the orchestrator; a scrape that fails is skipped, never fatal.
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from prometheus_client.parser import text_string_to_metric_families

from swarm.core.units import seconds_span, stage_name
from swarm.stats.quantiles import quantile_bucket


@dataclass
class MasterSample:
    requests: float = 0.0
    failed: float = 0.0
    cancelled: float = 0.0
    hung_up: float = 0.0  # cancelled_by_client (--cancel): neither failed nor the stop's cancelled
    users: float = 0.0
    stage: int = 0
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    replay_late: int = 0  # trace replay: rows sent over --trace-max-lag late


def parse_master_metrics(text: str) -> MasterSample:
    s = MasterSample()
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            if sample.name == "swarm_requests_total":
                s.requests += sample.value
                outcome = sample.labels.get("outcome")
                if outcome == "cancelled":
                    s.cancelled += sample.value
                elif outcome == "cancelled_by_client":
                    s.hung_up += sample.value
                elif outcome != "ok":
                    s.failed += sample.value
            elif sample.name == "swarm_users":
                s.users = sample.value
            elif sample.name == "swarm_stage":
                s.stage = int(sample.value)
            elif sample.name == "swarm_trace_replay_late_rows":
                s.replay_late = int(sample.value)
            elif sample.name == "swarm_ttft_seconds_bucket":
                le = float(sample.labels["le"])
                s.ttft_buckets[le] = s.ttft_buckets.get(le, 0.0) + sample.value
    return s


def window_line(
    prev: MasterSample, cur: MasterSample, dt: float, elapsed_s: float, total_s: float, stages: int
) -> str:
    """One progress line from two samples `dt` seconds apart (pure). `stages` < 0: as many as a
    search takes (the stage number alone)."""
    qps = (cur.requests - prev.requests) / dt if dt > 0 else 0.0
    bounds = sorted(cur.ttft_buckets)
    deltas = [cur.ttft_buckets[b] - prev.ttft_buckets.get(b, 0.0) for b in bounds]
    span = quantile_bucket(0.99, bounds, deltas)
    ttft = "-" if span is None else seconds_span(*span)
    name = stage_name(cur.stage)
    stage = f"{name}/{stages} " if stages > 1 else f"{name} " if stages < 0 else ""
    return (
        f"[{stage}{int(cur.users)} users] {elapsed_s:4.0f}s/{total_s:.0f}s | QPS {qps:6.2f} | "
        f"TTFT p99 {ttft} | requests {int(cur.requests)} | errors {int(cur.failed)}"
        + (f" | cancelled {int(cur.cancelled)}" if cur.cancelled else "")
        + (f" | hung up {int(cur.hung_up)}" if cur.hung_up else "")
        + (f" | replay behind: {cur.replay_late} rows late" if cur.replay_late else "")
    )


class Progress:
    def __init__(
        self,
        metrics_url: str,
        total_s: float,
        stages: int = 1,
        interval_s: float = 6.0,
        out: TextIO = sys.stdout,
        on_stage: Callable[[int, int], None] | None = None,
    ) -> None:
        self.url = metrics_url
        self.on_stage = on_stage  # called with (stage index, users) when the master's stage changes
        self.total_s = total_s
        self.stages = stages
        self.interval_s = interval_s
        self.out = out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)

    def start(self) -> Progress:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _scrape(self) -> MasterSample | None:
        try:
            with urllib.request.urlopen(self.url, timeout=2) as r:
                return parse_master_metrics(r.read().decode())
        except (OSError, ValueError):  # master not up yet or gone: skip this tick
            return None

    def _loop(self) -> None:
        t0 = time.monotonic()
        prev, prev_t = MasterSample(), t0
        while not self._stop.wait(self.interval_s):
            cur, now = self._scrape(), time.monotonic()
            if cur is None:
                continue
            if self.on_stage is not None and (cur.stage != prev.stage or prev_t == t0):
                self.on_stage(cur.stage, int(cur.users))
            print(
                window_line(prev, cur, now - prev_t, now - t0, self.total_s, self.stages),
                file=self.out,
                flush=True,
            )
            prev, prev_t = cur, now
