"""Mergeable per-(workload, stage, class, model, endpoint) aggregates: exact counters + latency sketches, and their wire form.

A worker adds every `RequestRecord` it produces to an `Aggregate`, hands the delta to Locust's
`report_to_master` every interval (`take_delta().to_wire()`), and the master adds each delta's wire
form to its own (`read_wire`, every part checked before anything is added, then `merge_read`:
no cell or sketch is built for a report; `from_wire` then `merge` gives the same). Merging is
associative and commutative, so one process and the same records split over N workers give the
same aggregate:

- counters (requests, outcome counts, token sums, latency counts, Prometheus bucket counts) are
  integers and merge exactly;
- each latency (TTFT, TTFA, ITL, TPOT, E2E, send lag) is a `LatencyStats` (swarm/stats/sketch.py):
  DDSketch bins that merge exactly, exact count/sum/min/max and Prometheus bucket counts.

The wire form's shapes are typed in swarm/stats/wire.py.

What is counted: every record counts in `requests`, its outcome, and the token sums (warm-up
and failed ones included). Failures also keep their messages: per outcome, the first
`ERROR_MESSAGES_MAX` distinct ones with a count each (a message seen later only when it is one of
those), so a server that says the same thing a million times costs one entry. And three times tell
when the target went away: the end of the last response (any status line) and of the first and
last `connect_error`. Latency distributions cover successful (`ok`), non-warm-up records
only: a failed request's "E2E" is the time to its failure, a `cancelled` one's the time to the
stop that cut it, and warm-up requests are excluded from a stage's statistics by definition.

Rates count completions. A cell is keyed by the stage a request was *sent* in (its latencies
belong to the load it met), but a request is *completed* in the window where it finished: the
stage then running, or `DRAIN` once the run's stop has begun. `completed` counts requests and
output tokens per completion window, so a stage's QPS is what finished inside it over its
length, and the drain after the stop is its own line, never divided by the load's duration.

Goodput (`--goodput`, swarm/stats/goodput.py): with a spec, a cell counts `goodput_counted`
(non-warm-up requests that were not cancelled: ok + failed) and `goodput_met` (those of them that
were good), and the good ones per completion window (the third number of `completed`), so the
goodput rate counts completions as QPS does. All exact integers, merged by addition.

Cached prompt tokens: a request whose server said how many of its prompt tokens came from its
prefix / prompt cache (`RequestRecord.cached_tokens` not None) adds to `cached`: [requests that
said, their cached tokens, their prompt tokens]. Requests that did not say count in none of the
three (absent is not zero), so cached / prompt tokens is the share over the requests that said.

Agents (swarm/load/agent.py): an agent step's record (any outcome) adds to `tools`: [steps, tool
calls, valid calls, steps with no call under `required`, tasks ended well (the records with a
`task_s`: their last step answered)], and
its invalid calls' reason (or `none_when_required`) to `tool_errors` (reason -> count); all exact.
The `task` latency is a finished task's duration, added from the record of its last step.

Confidence (swarm/stats/confidence.py): `per_bin` counts completions per BIN_S of wall-clock time
(bin = floor(end / BIN_S), the request's end), any outcome, so the master can put an interval on a
window's QPS from the bins inside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from swarm.core.records import LATENCIES, NONE_WHEN_REQUIRED, OUTCOMES, Outcome, RequestRecord
from swarm.stats.goodput import GoodputSpec
from swarm.stats.sketch import REL_ACCURACY, LatencyRead, LatencyStats, read_latency
from swarm.stats.turns import TurnStats
from swarm.stats.wire import AggregateWire, CellWire

WIRE_VERSION = 9  # 2: cells carry `done` (completions per window); 3: and `model`; 4: goodput, `per_bin`;
# 5: `turns` (conversations); 6: `cached` (prompt tokens served from the server's cache); 7: `endpoint`;
# 8: `tools` and `tool_errors` (agent steps), the `ttftc` and `task` latencies; 9: sketch bins as bytes
BIN_S = 0.5  # completions are counted per this much wall-clock time (QPS intervals)
ERROR_MESSAGES_MAX = 10  # distinct failure messages kept per outcome (the first seen)
ERROR_MESSAGE_CHARS = 200
DRAIN = -1  # completion window of the requests that finished after the run's stop began


class Cell:
    """Everything measured for one (workload, stage, class, model, endpoint): exact counters and the latencies."""

    __slots__ = (
        "cached",
        "completed",
        "endpoint",
        "errors",
        "first_connect_error_s",
        "first_start_s",
        "goodput_counted",
        "goodput_met",
        "klass",
        "last_connect_error_s",
        "last_end_s",
        "last_response_s",
        "latencies",
        "model",
        "outcomes",
        "output_tokens",
        "per_bin",
        "prompt_tokens",
        "reasoning_tokens",
        "requests",
        "stage",
        "tool_errors",
        "tools",
        "warmup_requests",
        "warmup_ttft",
        "workload",
    )

    def __init__(
        self,
        workload: str,
        stage: int = 0,
        klass: str = "direct",
        model: str = "",
        endpoint: str = "",
    ) -> None:
        self.workload = workload
        self.klass = klass  # the request class (swarm/core/records.py `request_class`)
        self.model = model  # the served model the requests named ("" = none)
        self.endpoint = endpoint  # the endpoint the requests went to (swarm/core/urls.py `endpoint_label`)
        self.stage = stage
        self.requests = 0
        self.warmup_requests = 0
        self.warmup_ttft = [0, 0.0]  # warm-up requests answered: [count, sum of TTFT] (the search's settling)
        self.outcomes: dict[str, int] = {o.value: 0 for o in OUTCOMES}
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self.first_start_s: float | None = None  # earliest send time (time.time())
        self.last_end_s: float | None = None  # latest send + e2e
        self.errors: dict[str, dict[str, int]] = {}  # failed outcome -> {message: count}, capped
        self.last_response_s: float | None = None  # latest end of a request that got a status line
        self.first_connect_error_s: float | None = None  # earliest / latest end of a connect_error
        self.last_connect_error_s: float | None = None
        self.latencies: dict[str, LatencyStats] = {name: LatencyStats() for name in LATENCIES}
        self.completed: dict[int, list[int]] = {}  # completion window -> [requests, output tokens, good]
        self.goodput_met = 0  # good requests (--goodput), of the `goodput_counted` ones
        self.goodput_counted = 0  # non-warm-up, non-cancelled requests, counted only with a spec
        self.per_bin: dict[int, int] = {}  # floor(end / BIN_S) -> requests completed then
        self.cached = [0, 0, 0]  # requests that reported cached tokens, their cached and prompt tokens
        self.tools = [0, 0, 0, 0, 0]  # agent steps: steps, calls, valid calls, none under required, tasks
        self.tool_errors: dict[str, int] = {}  # reason -> steps whose calls were invalid for it

    def add(self, r: RequestRecord, window: int | None = None, goodput: GoodputSpec | None = None) -> None:
        """Count `r`; `window`: where it finished (a stage index or DRAIN; None: its own stage);
        `goodput`: the per-request SLOs to judge it by (None: not judged)."""
        outcome = Outcome(r.outcome)
        self.requests += 1
        self.outcomes[outcome.value] += 1
        self.prompt_tokens += r.prompt_tokens or 0
        self.output_tokens += r.output_tokens or 0
        if r.cached_tokens is not None:
            cached = self.cached
            cached[0] += 1
            cached[1] += r.cached_tokens
            cached[2] += r.prompt_tokens or 0
        if window is None:
            window = r.stage
        done = self.completed.get(window)
        if done is None:
            done = self.completed[window] = [0, 0, 0]
        done[0] += 1
        done[1] += r.output_tokens or 0
        self.reasoning_tokens += r.reasoning_tokens or 0
        start = r.start_wall_s
        end = start + (r.e2e_s or 0.0)
        b = int(end / BIN_S)
        self.per_bin[b] = self.per_bin.get(b, 0) + 1
        if goodput is not None and goodput.counted(r):
            self.goodput_counted += 1
            if goodput.met(r):
                self.goodput_met += 1
                done[2] += 1
        if self.first_start_s is None or start < self.first_start_s:
            self.first_start_s = start
        if self.last_end_s is None or end > self.last_end_s:
            self.last_end_s = end
        if outcome.failed:
            self._count_error(outcome.value, r.error or "", 1)
        if r.http_status is not None:
            if self.last_response_s is None or end > self.last_response_s:
                self.last_response_s = end
        elif outcome is Outcome.CONNECT_ERROR:
            self._connect_errors(end, end)
        if r.step is not None:
            self._count_tools(r)
        if r.warmup:
            self.warmup_requests += 1
            if outcome is Outcome.OK and r.ttft_s is not None:
                self.warmup_ttft[0] += 1
                self.warmup_ttft[1] += r.ttft_s
            return
        lat = self.latencies
        if r.send_lag_s is not None:  # open loop: lateness of every request sent, failed ones too
            lat["send_lag"].add(r.send_lag_s)
        if outcome is not Outcome.OK:
            return
        if r.ttft_s is not None:
            lat["ttft"].add(r.ttft_s)
        if r.ttfa_s is not None:
            lat["ttfa"].add(r.ttfa_s)
        if r.tpot_s is not None:
            lat["tpot"].add(r.tpot_s)
        if r.e2e_s is not None:
            lat["e2e"].add(r.e2e_s)
        if r.itl_s:
            lat["itl"].extend(r.itl_s)
        if r.ttftc_s is not None:
            lat["ttftc"].add(r.ttftc_s)
        if r.task_s is not None:
            lat["task"].add(r.task_s)

    def _count_tools(self, r: RequestRecord) -> None:
        tools = self.tools
        tools[0] += 1
        tools[1] += r.tool_calls or 0
        tools[2] += r.tool_calls_valid or 0
        if r.tool_error == NONE_WHEN_REQUIRED:
            tools[3] += 1
        if r.task_s is not None:
            tools[4] += 1
        if r.tool_error is not None:
            self.tool_errors[r.tool_error] = self.tool_errors.get(r.tool_error, 0) + 1

    def _count_error(self, outcome: str, message: str, n: int) -> None:
        msgs = self.errors.get(outcome)
        if msgs is None:
            msgs = self.errors[outcome] = {}
        message = message[:ERROR_MESSAGE_CHARS]
        if message in msgs:
            msgs[message] += n
        elif len(msgs) < ERROR_MESSAGES_MAX:
            msgs[message] = n

    def _connect_errors(self, first: float | None, last: float | None) -> None:
        if first is not None and (self.first_connect_error_s is None or first < self.first_connect_error_s):
            self.first_connect_error_s = first
        if last is not None and (self.last_connect_error_s is None or last > self.last_connect_error_s):
            self.last_connect_error_s = last

    @property
    def failures(self) -> dict[str, int]:
        """Failed outcome -> count (every failure outcome present, zeros included)."""
        return {o.value: self.outcomes[o.value] for o in OUTCOMES if o.failed}

    @property
    def failed(self) -> int:
        """Requests that failed (cancelled ones, by the stop or by their client, are not failures)."""
        return self.requests - self.outcomes[Outcome.OK.value] - self.cancelled - self.cancelled_by_client

    @property
    def cancelled(self) -> int:
        """Cut by the swarm's own stop."""
        return self.outcomes[Outcome.CANCELLED.value]

    @property
    def cancelled_by_client(self) -> int:
        """Cut by their client on purpose (--cancel)."""
        return self.outcomes[Outcome.CANCELLED_BY_CLIENT.value]

    def completed_in(self, windows: Iterator[int] | list[int] | None = None) -> tuple[int, int]:
        """(requests, output tokens) that finished in `windows` (None: every window but DRAIN)."""
        n = tokens = 0
        for w, (k, t, _) in self.completed.items():
            if (w != DRAIN) if windows is None else (w in windows):
                n += k
                tokens += t
        return n, tokens

    def good_in(self, windows: Iterator[int] | list[int] | None = None) -> int:
        """Good requests (--goodput) that finished in `windows` (None: every window but DRAIN)."""
        return sum(
            g
            for w, (_, _, g) in self.completed.items()
            if ((w != DRAIN) if windows is None else (w in windows))
        )

    def window_s(self) -> float | None:
        """Seconds from the first send to the last completion seen in this cell."""
        if self.first_start_s is None or self.last_end_s is None:
            return None
        return max(0.0, self.last_end_s - self.first_start_s)

    def merge(self, other: Cell, bins: bool = True) -> None:
        """Add `other` in; `bins`: its completions per bin too (False: a view that needs no interval)."""
        self.merge_read(other._read(bins))

    def _read(self, bins: bool = True) -> CellRead:
        """This cell as `merge_read` adds it (`bins`: with its completions per bin, the only part
        that grows with the run's length); its latencies' bins are views of their stores."""
        return CellRead(
            requests=self.requests,
            warmup=self.warmup_requests,
            warmup_ttft=(self.warmup_ttft[0], self.warmup_ttft[1]),
            outcomes=list(self.outcomes.items()),
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cached=self.cached,
            tools=self.tools,
            tool_errors=list(self.tool_errors.items()),
            done=[(w, k, t, g) for w, (k, t, g) in self.completed.items()],
            goodput=(self.goodput_met, self.goodput_counted),
            per_bin=list(self.per_bin.items()) if bins else [],
            first_start_s=self.first_start_s,
            last_end_s=self.last_end_s,
            errors=[(o, m, n) for o, msgs in self.errors.items() for m, n in msgs.items()],
            last_response_s=self.last_response_s,
            connect_errors=(self.first_connect_error_s, self.last_connect_error_s),
            lat=[(name, stats._read()) for name, stats in self.latencies.items() if stats.count],
        )

    def to_wire(self) -> CellWire:
        for s in self.latencies.values():
            s.flush()
        return {
            "workload": self.workload,
            "stage": self.stage,
            "requests": self.requests,
            "warmup": self.warmup_requests,
            "warmup_ttft": [self.warmup_ttft[0], self.warmup_ttft[1]],
            "outcomes": {k: n for k, n in self.outcomes.items() if n},
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "first_start_s": self.first_start_s,
            "last_end_s": self.last_end_s,
            "errors": {k: dict(v) for k, v in self.errors.items()},
            "last_response_s": self.last_response_s,
            "first_connect_error_s": self.first_connect_error_s,
            "last_connect_error_s": self.last_connect_error_s,
            "lat": {name: s.to_wire() for name, s in self.latencies.items() if s.count},
            "done": [[w, k, t, g] for w, (k, t, g) in self.completed.items()],
            "klass": self.klass,
            "model": self.model,
            "endpoint": self.endpoint,
            "goodput": [self.goodput_met, self.goodput_counted],
            "per_bin": [[b, n] for b, n in sorted(self.per_bin.items())],
            "cached": list(self.cached),
            "tools": list(self.tools),
            "tool_errors": dict(self.tool_errors),
        }

    @classmethod
    def from_wire(cls, d: CellWire) -> Cell:
        key, read = read_cell(d)
        c = cls(*key)
        c.merge_read(read)
        return c

    def merge_read(self, r: CellRead) -> None:
        """Add a read wire form in, as `merge(Cell.from_wire(...))` would, without building its cell."""
        self.requests += r.requests
        self.warmup_requests += r.warmup
        self.warmup_ttft[0] += r.warmup_ttft[0]
        self.warmup_ttft[1] += r.warmup_ttft[1]
        outcomes = self.outcomes
        for k, n in r.outcomes:
            outcomes[k] = outcomes.get(k, 0) + n
        self.prompt_tokens += r.prompt_tokens
        self.output_tokens += r.output_tokens
        self.reasoning_tokens += r.reasoning_tokens
        self.cached = [a + b for a, b in zip(self.cached, r.cached, strict=True)]
        self.tools = [a + b for a, b in zip(self.tools, r.tools, strict=True)]
        for reason, n in r.tool_errors:
            self.tool_errors[reason] = self.tool_errors.get(reason, 0) + n
        completed = self.completed
        for w, k, t, g in r.done:
            done = completed.get(w)
            if done is None:
                completed[w] = [k, t, g]
            else:
                done[0] += k
                done[1] += t
                done[2] += g
        self.goodput_met += r.goodput[0]
        self.goodput_counted += r.goodput[1]
        per_bin = self.per_bin
        for b, n in r.per_bin:
            per_bin[b] = per_bin.get(b, 0) + n
        if r.first_start_s is not None and (
            self.first_start_s is None or r.first_start_s < self.first_start_s
        ):
            self.first_start_s = r.first_start_s
        if r.last_end_s is not None and (self.last_end_s is None or r.last_end_s > self.last_end_s):
            self.last_end_s = r.last_end_s
        for outcome, message, n in r.errors:
            self._count_error(outcome, message, n)
        if r.last_response_s is not None and (
            self.last_response_s is None or r.last_response_s > self.last_response_s
        ):
            self.last_response_s = r.last_response_s
        self._connect_errors(*r.connect_errors)
        lat = self.latencies
        for name, w in r.lat:
            lat[name].merge_read(w)


CellKey = tuple[str, int, str, str, str]  # (workload, stage, class, model, endpoint)


class CellRead(NamedTuple):
    """A cell's wire form (swarm/stats/wire.py `CellWire`) read and checked: what `Cell.merge_read` adds."""

    requests: int
    warmup: int
    warmup_ttft: tuple[int, float]
    outcomes: list[tuple[str, int]]
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cached: list[int]
    tools: list[int]
    tool_errors: list[tuple[str, int]]
    done: list[tuple[int, int, int, int]]
    goodput: tuple[int, int]
    per_bin: list[tuple[int, int]]
    first_start_s: float | None
    last_end_s: float | None
    errors: list[tuple[str, str, int]]
    last_response_s: float | None
    connect_errors: tuple[float | None, float | None]
    lat: list[tuple[str, LatencyRead]]  # the non-empty ones; a name of another version's is not read


def _time(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def read_cell(d: CellWire) -> tuple[CellKey, CellRead]:
    """Read one cell of a report; raises ValueError / KeyError / TypeError for one of another shape."""
    key = (
        str(d["workload"]),
        int(d["stage"]),
        str(d.get("klass", "direct")),
        str(d["model"]),
        str(d["endpoint"]),
    )
    n, total = d.get("warmup_ttft") or (0, 0.0)
    cached, tools = [int(n) for n in d["cached"]], [int(n) for n in d["tools"]]
    if len(cached) != 3 or len(tools) != 5:
        raise ValueError(f"cached {len(cached)} / tools {len(tools)} numbers, expected 3 / 5")
    lat = d["lat"]
    good, judged = d["goodput"]
    return key, CellRead(
        requests=int(d["requests"]),
        warmup=int(d["warmup"]),
        warmup_ttft=(int(n), float(total)),
        outcomes=[(Outcome(k).value, int(n)) for k, n in d["outcomes"].items()],
        prompt_tokens=int(d["prompt_tokens"]),
        output_tokens=int(d["output_tokens"]),
        reasoning_tokens=int(d["reasoning_tokens"]),
        cached=cached,
        tools=tools,
        tool_errors=[(str(k), int(n)) for k, n in d["tool_errors"].items()],
        done=[(int(w), int(k), int(t), int(g)) for w, k, t, g in d["done"]],
        goodput=(int(good), int(judged)),
        per_bin=[(int(b), int(n)) for b, n in d["per_bin"]],
        first_start_s=_time(d["first_start_s"]),
        last_end_s=_time(d["last_end_s"]),
        errors=[
            (Outcome(outcome).value, str(message), int(n))
            for outcome, msgs in (d.get("errors") or {}).items()
            for message, n in msgs.items()
        ],
        last_response_s=_time(d.get("last_response_s")),
        connect_errors=(_time(d.get("first_connect_error_s")), _time(d.get("last_connect_error_s"))),
        lat=[(name, read_latency(lat[name])) for name in LATENCIES if name in lat],
    )


class Aggregate:
    """Cells keyed by (workload, stage, class, model, endpoint); the unit that is added to, merged, shipped
    and summarised."""

    def __init__(self, goodput: GoodputSpec | None = None) -> None:
        self.cells: dict[tuple[str, int, str, str, str], Cell] = {}
        self.goodput = goodput  # the per-request SLOs records are judged by when added (None: none)
        self.turns = TurnStats()  # conversations' per-turn side table (records with a `turn` only)

    def __bool__(self) -> bool:
        return bool(self.cells)

    def __iter__(self) -> Iterator[Cell]:
        return iter(self.cells.values())

    def cell(
        self, workload: str, stage: int = 0, klass: str = "direct", model: str = "", endpoint: str = ""
    ) -> Cell:
        key = (workload, stage, klass, model, endpoint)
        c = self.cells.get(key)
        if c is None:
            c = self.cells[key] = Cell(workload, stage, klass, model, endpoint)
        return c

    def add(self, record: RequestRecord, window: int | None = None) -> None:
        """Count `record` in its (workload, sent stage, class, model, endpoint) cell; `window`: see `Cell.add`."""
        cell = self.cell(
            record.workload, int(record.stage), record.request_class, record.model or "", record.endpoint
        )
        cell.add(record, window, self.goodput)
        if record.turn is not None:
            self.turns.add(record)

    def merge(self, other: Aggregate) -> None:
        for c in other:
            self.cell(c.workload, c.stage, c.klass, c.model, c.endpoint).merge(c)
        if other.turns:
            self.turns.merge(other.turns)

    def take_delta(self) -> Aggregate:
        """Hand over everything added since the last call and start empty (worker side)."""
        delta = Aggregate(self.goodput)
        delta.cells, self.cells = self.cells, {}
        delta.turns, self.turns = self.turns, TurnStats()
        return delta

    def workloads(self) -> list[str]:
        return sorted({w for w, _, _, _, _ in self.cells})

    def stages(self) -> list[int]:
        return sorted({s for _, s, _, _, _ in self.cells})

    def classes(self, workload: str | None = None) -> list[str]:
        """The request classes seen (of one workload, or of all)."""
        return sorted({k for w, _, k, _, _ in self.cells if workload is None or w == workload})

    def models(self) -> list[str]:
        """The served models the requests named ("" for requests sent without a model name)."""
        return sorted({m for _, _, _, m, _ in self.cells})

    def endpoints(self) -> list[str]:
        """The endpoints the requests went to (their labels; "" for records that name none)."""
        return sorted({e for _, _, _, _, e in self.cells})

    def combined(
        self,
        workload: str | None = None,
        stage: int | None = None,
        klass: str | None = None,
        model: str | None = None,
        endpoint: str | None = None,
        *,
        bins: bool = False,
    ) -> Cell:
        """A fresh cell merging every cell matching `workload`, `stage`, `klass`, `model` and `endpoint`
        (None = all);
        `bins`: with their completions per bin (only QPS intervals read them: the views served live,
        /metrics and the LLM tab, skip a merge that grows with the run's length)."""
        out = Cell(
            workload or "total",
            -1 if stage is None else stage,
            klass or "all",
            model or "all",
            endpoint or "all",
        )
        for (w, s, k, m, e), c in self.cells.items():
            if (
                (workload is None or w == workload)
                and (stage is None or s == stage)
                and (klass is None or k == klass)
                and (model is None or m == model)
                and (endpoint is None or e == endpoint)
            ):
                out.merge(c, bins)
        return out

    def to_wire(self) -> AggregateWire:
        """A msgpack-able dict (dicts, lists, str, int, float, None only)."""
        out: AggregateWire = {
            "v": WIRE_VERSION,
            "rel_acc": REL_ACCURACY,
            "cells": [c.to_wire() for c in self],
        }
        if self.turns:
            out["turns"] = self.turns.to_wire()
        return out

    @staticmethod
    def finished_in(d: AggregateWire) -> int:
        """Requests a worker's report says finished (every completion window), read without
        decoding the sketches: the search's live QPS counts these per report."""
        return sum(int(row[1]) for cd in d.get("cells") or [] for row in cd.get("done") or [])

    @classmethod
    def from_wire(cls, d: AggregateWire) -> Aggregate:
        agg = cls()
        agg.merge_read(cls.read_wire(d))
        return agg

    @staticmethod
    def read_wire(d: AggregateWire) -> ReportRead:
        """Read a report's aggregate, every part checked; raises ValueError / KeyError / TypeError
        for one of another version or shape, before anything is added anywhere."""
        if d.get("v") != WIRE_VERSION or d.get("rel_acc") != REL_ACCURACY:
            raise ValueError(
                f"aggregate wire format v{d.get('v')} rel_acc {d.get('rel_acc')} does not match "
                f"v{WIRE_VERSION} rel_acc {REL_ACCURACY} (mixed swarm versions?)"
            )
        turns = d.get("turns")
        return ReportRead(
            [read_cell(cd) for cd in d["cells"]], None if turns is None else TurnStats.from_wire(turns)
        )

    def merge_read(self, r: ReportRead) -> None:
        """Add a read report in, as `merge(from_wire(...))` would, without building its cells (the
        master merges each report so: benchmarks/master_scale.py). `r` is not kept: it can be added
        to several aggregates."""
        cells = self.cells
        for key, read in r.cells:
            c = cells.get(key)
            if c is None:
                c = cells[key] = Cell(*key)
            c.merge_read(read)
        if r.turns:
            self.turns.merge(r.turns)


class ReportRead(NamedTuple):
    """A report's aggregate read and checked (`Aggregate.read_wire`), ready to add (`merge_read`)."""

    cells: list[tuple[CellKey, CellRead]]
    turns: TurnStats | None
