"""Per-turn statistics of conversations (`chat_session`): a small side table of the `Aggregate`.

Only records that carry a `turn` (swarm/core/records.py) enter it, so every other request pays one
attribute test. Turns are bucketed into bounded labels — "1", "2", "3", "4+" — and each bucket
keeps exact counters (requests, ok, prompt and output tokens) and one TTFT sketch (ok, non-warm-up
requests, as the cells' latencies). Conversations started are the turn-1 requests; `cut` counts
conversations the user ended early because the next turn would pass the target's `max_model_len`.
Merging is exact (counters) or sketch-exact (DDSketch bins), like the cells'.
"""

from __future__ import annotations

from typing import Any

from swarm.core.records import TURN_BUCKETS, Outcome, RequestRecord, turn_bucket
from swarm.stats import quantiles
from swarm.stats.sketch import LatencyStats
from swarm.stats.wire import TurnCellWire, TurnsWire


class TurnCell:
    __slots__ = ("cancelled", "ok", "output_tokens", "prompt_tokens", "requests", "ttft")

    def __init__(self) -> None:
        self.requests = 0
        self.ok = 0
        self.cancelled = 0  # cut by the swarm's own stop: neither ok nor failed
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.ttft = LatencyStats()

    def merge(self, other: TurnCell) -> None:
        self.requests += other.requests
        self.ok += other.ok
        self.cancelled += other.cancelled
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.ttft.merge(other.ttft)


class TurnStats:
    """Bucket label -> `TurnCell`, plus the count of conversations cut at the context limit."""

    __slots__ = ("cells", "cut")

    def __init__(self) -> None:
        self.cells: dict[str, TurnCell] = {}
        self.cut = 0

    def __bool__(self) -> bool:
        return bool(self.cells) or self.cut > 0

    def add(self, r: RequestRecord) -> None:
        key = turn_bucket(r.turn or 1)
        c = self.cells.get(key)
        if c is None:
            c = self.cells[key] = TurnCell()
        c.requests += 1
        if r.outcome is Outcome.OK:
            c.ok += 1
            c.prompt_tokens += r.prompt_tokens or 0
            c.output_tokens += r.output_tokens
            if r.ttft_s is not None and not r.warmup:
                c.ttft.add(r.ttft_s)
        elif r.outcome is Outcome.CANCELLED or r.outcome is Outcome.CANCELLED_BY_CLIENT:
            c.cancelled += 1  # (a turn cut by the stop or by its client: neither ok nor failed)

    def merge(self, other: TurnStats) -> None:
        self.cut += other.cut
        for key, c in other.cells.items():
            mine = self.cells.get(key)
            if mine is None:
                mine = self.cells[key] = TurnCell()
            mine.merge(c)

    def to_wire(self) -> TurnsWire:
        turns: dict[str, TurnCellWire] = {}
        for key, c in self.cells.items():
            c.ttft.flush()
            turns[key] = {
                "requests": c.requests,
                "ok": c.ok,
                "cancelled": c.cancelled,
                "prompt_tokens": c.prompt_tokens,
                "output_tokens": c.output_tokens,
                "ttft": c.ttft.to_wire(),
            }
        return {"cut": self.cut, "turns": turns}

    @classmethod
    def from_wire(cls, d: TurnsWire) -> TurnStats:
        out = cls()
        out.cut = int(d["cut"])
        for key, cw in d["turns"].items():
            if key not in TURN_BUCKETS:
                raise ValueError(f"unknown turn bucket {key!r} on the wire")
            c = out.cells[key] = TurnCell()
            c.requests, c.ok, c.cancelled = int(cw["requests"]), int(cw["ok"]), int(cw["cancelled"])
            c.prompt_tokens, c.output_tokens = int(cw["prompt_tokens"]), int(cw["output_tokens"])
            c.ttft = LatencyStats.from_wire(cw["ttft"])
        return out

    def summary(self, in_flight_mean: float | None = None) -> dict[str, Any]:
        """summary.json's `sessions` key: conversations started and cut, the average requests in
        flight, and per turn bucket: requests, ok, mean prompt/output tokens, TTFT statistics."""
        by_turn: dict[str, Any] = {}
        for key in TURN_BUCKETS:
            c = self.cells.get(key)
            if c is None:
                continue
            by_turn[key] = {
                "requests": c.requests,
                "ok": c.ok,
                "cancelled": c.cancelled,
                "prompt_tokens_mean": c.prompt_tokens / c.ok if c.ok else None,
                "output_tokens_mean": c.output_tokens / c.ok if c.ok else None,
                "ttft_s": quantiles.sketch_stats(c.ttft),
            }
        first = self.cells.get("1")
        return {
            "started": first.requests if first is not None else 0,
            "cut_at_max_model_len": self.cut,
            "in_flight_mean": in_flight_mean,
            "turns": by_turn,
        }
