"""The worker -> master wire format: typed shapes of what a worker ships in each report.

Locust's `report_to_master` carries a msgpack-able dict; the swarm's part sits under
`data["swarm"]` (`WIRE_KEY`) as a `WorkerReport`: the worker's unsent `Aggregate` delta
(swarm/stats/aggregate.py: `to_wire` / `read_wire`) plus what the master needs to know of the
worker. `WIRE_VERSION` and `rel_acc` must match on both sides (mixed swarm versions are refused
per report, never merged wrongly). Only dicts, lists, str, int, float, bool and None.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

WIRE_KEY = "swarm"


class LatencyWire(TypedDict):
    """One latency (swarm/stats/sketch.py `LatencyStats`)."""

    n: int  # values
    sum: float
    min: float
    max: float
    zero: int  # values too small for the log mapping
    k0: int  # key of bins[0]
    w: int  # bytes per bin count: 1, 2, 4 or 8; since 9
    bins: bytes  # DDSketch bin counts from key k0 on: little-endian unsigned, `w` bytes each; since 9
    le: list[int]  # non-cumulative counts per bucket bound, then one above the last


class CellWire(TypedDict):
    """One (workload, stage, class, model, endpoint) cell (swarm/stats/aggregate.py `Cell`)."""

    workload: str
    stage: int
    requests: int
    warmup: int
    warmup_ttft: NotRequired[list[float]]  # warm-up requests answered: [count, sum of TTFT s] (absent: none)
    outcomes: dict[str, int]  # non-zero outcome counts
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int
    first_start_s: float | None
    last_end_s: float | None
    errors: dict[str, dict[str, int]]  # failed outcome -> {message: count}
    last_response_s: float | None
    first_connect_error_s: float | None
    last_connect_error_s: float | None
    lat: dict[str, LatencyWire]  # latencies with at least one value
    done: list[
        list[int]
    ]  # [[completion window (stage index or -1: the drain), requests, output tokens, good]]
    klass: NotRequired[str]  # the request class (absent: "direct")
    model: str  # the served model the requests named ("" = none); since WIRE_VERSION 3
    endpoint: str  # the endpoint the requests went to (its label; "" = none named); since 7
    goodput: list[int]  # [good requests, requests judged] (--goodput; zeros without); since 4
    per_bin: list[list[int]]  # [[floor(end / BIN_S), requests completed]]; since 4
    # [requests that reported cached prompt tokens, those cached tokens, their prompt tokens]; since 6
    cached: list[int]
    # agent steps: [steps, tool calls, valid calls, steps with none under required, tasks ended]; since 8
    tools: list[int]
    tool_errors: dict[str, int]  # invalid calls' reason (or none_when_required) -> steps; since 8


class TurnCellWire(TypedDict):
    """One turn bucket of conversations (swarm/stats/turns.py `TurnCell`)."""

    requests: int
    ok: int
    cancelled: int  # cut by the swarm's own stop
    prompt_tokens: int  # of ok requests (server usage)
    output_tokens: int
    ttft: LatencyWire


class TurnsWire(TypedDict):
    """Conversations' per-turn statistics (swarm/stats/turns.py `TurnStats`); since WIRE_VERSION 4."""

    cut: int  # conversations cut because the next turn would pass max_model_len
    turns: dict[str, TurnCellWire]  # turn bucket ("1", "2", "3", "4+") -> its counters


class AggregateWire(TypedDict):
    v: int  # WIRE_VERSION
    rel_acc: float  # the sketches' relative accuracy
    cells: list[CellWire]
    turns: NotRequired[TurnsWire]  # only when conversations sent requests (or were cut)


class WorkerReport(AggregateWire):
    """`data["swarm"]` of one worker report: the delta since the last report, and the worker's state."""

    stopped: bool  # the worker's users have stopped: this is its final report of the test
    model_name: str | None  # the model the worker's users send to (discovered or --model)
    cpu: list[list[float]]  # [[stage, CPU s, wall s, run-queue wait s]] since the last report
    in_flight: NotRequired[int]  # requests sent and not yet recorded (the LLM tab's chart)
    internal_error: NotRequired[bool]  # the worker logged an exception in its own code (exit 2)
