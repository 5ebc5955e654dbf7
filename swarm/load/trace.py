"""Production traces to replay: parse a trace file into rows with their send times.

`--trace-replay FILE --trace-format FORMAT` (REFERENCE.md §9 has the formats as published):

| format    | file  | time                          | input            | output            | prefix blocks |
|-----------|-------|-------------------------------|------------------|-------------------|---------------|
| mooncake  | JSONL | `timestamp` (ms)              | `input_length`   | `output_length`   | `hash_ids`    |
| azure     | CSV   | `TIMESTAMP` (date and time)   | `ContextTokens`  | `GeneratedTokens` | none          |
| burstgpt  | CSV   | `Timestamp` (s)               | `Request tokens` | `Response tokens` | none          |
| jsonl     | JSONL | `start_wall_s` (s)            | `prompt_tokens`  | `output_tokens`   | `hash_ids` (optional) |

`jsonl` reads the swarm's own record fields, so a run's requests (requests.parquet as JSONL)
replay as they were sent. A row's id is its 0-based data row in the file (the header and blank
lines do not count), kept through `--trace-start` / `--trace-duration` (a window in the trace's
own time, from its first row) and `--time-scale X` (2 = twice as fast). A bad row is an error that
names the file and line. Pure functions: no Locust, no network.

Prefix blocks: in Mooncake, rows that share a hash id share that block of `block_size` tokens
(512) of their prompts, and hash ids are chained (the same id at position i means the same
prefix up to block i). `implied_hit_rate` is the prefix-cache hit rate that follows when the rows
are sent in order and nothing is evicted: the share of prompt tokens in leading blocks that an
earlier row already carried.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from swarm.core.errors import UsageError
from swarm.core.options import TRACE_FORMATS

FORMATS = TRACE_FORMATS
MOONCAKE_BLOCK = 512  # tokens per hash id in the Mooncake traces (FAST'25)
_CSV = {  # format -> (time column, input column, output column)
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}
_JSONL = {  # format -> (time key, its unit in seconds, input key, output key)
    "mooncake": ("timestamp", 0.001, "input_length", "output_length"),
    "jsonl": ("start_wall_s", 1.0, "prompt_tokens", "output_tokens"),
}


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace: when (seconds after the replay starts), how long in and out."""

    row: int  # 0-based data row in the file: the row's id through the whole replay
    at_s: float  # send time after the replay's start, already scaled and windowed
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # prefix blocks (Mooncake); () = the prompt shares nothing

    def to_wire(self) -> list[Any]:
        return [self.row, self.at_s, self.input_tokens, self.output_tokens, list(self.hash_ids)]

    @classmethod
    def from_wire(cls, v: Sequence[Any]) -> TraceRow:
        return cls(int(v[0]), float(v[1]), int(v[2]), int(v[3]), tuple(int(h) for h in v[4]))


@dataclass(frozen=True)
class Trace:
    path: str
    format: str
    rows: tuple[TraceRow, ...]  # in send order
    rows_in_file: int
    block_size: int  # tokens per hash id
    time_scale: float

    @property
    def span_s(self) -> float:
        return self.rows[-1].at_s if self.rows else 0.0


def _bad(path: Path, line: int, why: str) -> UsageError:
    return UsageError(f"--trace-replay {path}: line {line}: {why}")


def _tokens(value: Any, path: Path, line: int, name: str, minimum: int) -> int:
    try:
        n = float(value)
    except (TypeError, ValueError):
        raise _bad(path, line, f"{name} is not a number ({value!r})") from None
    if not math.isfinite(n) or n != int(n) or n < minimum:
        raise _bad(path, line, f"{name} must be a whole number >= {minimum} (got {value!r})")
    return int(n)


def _seconds(value: Any, path: Path, line: int, name: str, unit: float) -> float:
    try:
        t = float(value) * unit
    except (TypeError, ValueError):
        raise _bad(path, line, f"{name} is not a number ({value!r})") from None
    if not math.isfinite(t) or t < 0:
        raise _bad(path, line, f"{name} must be a time >= 0 (got {value!r})")
    return t


def _azure_time(value: str, path: Path, line: int) -> float:
    """`2023-11-16 18:15:46.6805900` (7 fraction digits: more than datetime takes) -> epoch seconds."""
    whole, _, frac = (value or "").strip().partition(".")
    try:
        t = datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp()
        return t + (float("0." + frac) if frac else 0.0)
    except ValueError:
        raise _bad(path, line, f"TIMESTAMP is not a date and time ({value!r})") from None


def _read_jsonl(path: Path, fmt: str) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
    t_key, unit, in_key, out_key = _JSONL[fmt]
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise _bad(path, line_no, f"not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise _bad(path, line_no, "not a JSON object")
            missing = [k for k in (t_key, in_key, out_key) if k not in obj]
            if missing:
                raise _bad(
                    path, line_no, f"no {', '.join(missing)} (a {fmt} row has {t_key}, {in_key}, {out_key})"
                )
            hashes = obj.get("hash_ids") or []
            if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
                raise _bad(path, line_no, "hash_ids must be a list of integers")
            yield (
                line_no,
                _seconds(obj[t_key], path, line_no, t_key, unit),
                _tokens(obj[in_key], path, line_no, in_key, 1),
                _tokens(obj[out_key], path, line_no, out_key, 0),
                tuple(hashes),
            )


def _read_csv(path: Path, fmt: str) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
    t_col, in_col, out_col = _CSV[fmt]
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in (t_col, in_col, out_col) if c not in header]
        if missing:
            raise _bad(
                path, 1, f"no column {', '.join(missing)} (a {fmt} trace has {t_col}, {in_col}, {out_col})"
            )
        reader.fieldnames = header
        for row in reader:
            line_no = reader.line_num
            if None in row or any(row.get(c) is None for c in (t_col, in_col, out_col)):
                raise _bad(path, line_no, f"{len(header)} columns expected")
            t = (
                _azure_time(row[t_col], path, line_no)
                if fmt == "azure"
                else _seconds(row[t_col], path, line_no, t_col, 1.0)
            )
            yield (
                line_no,
                t,
                _tokens(row[in_col], path, line_no, in_col, 1),
                _tokens(row[out_col], path, line_no, out_col, 0),
                (),
            )


def load_trace(
    path: str | Path,
    fmt: str,
    *,
    time_scale: float = 1.0,
    start_s: float = 0.0,
    duration_s: float | None = None,
    block_size: int = MOONCAKE_BLOCK,
) -> Trace:
    """The rows of `path` in the window [start, start + duration) of the trace's own time (from its
    first row), sent at (t - first - start) / time_scale. Raises UsageError naming a bad line, or a
    bad option: the trace options' ranges are checked here alone, where `swarm run`'s plan and the
    master (swarm/live/replay.py) both load the trace, before anything starts."""
    p = Path(path)
    if fmt not in FORMATS:
        raise UsageError(f"--trace-format {fmt!r}: use one of {', '.join(FORMATS)}")
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise UsageError(f"--time-scale must be > 0 (got {time_scale})")
    if start_s < 0 or (duration_s is not None and duration_s <= 0):
        raise UsageError("--trace-start must be >= 0 and --trace-duration > 0")
    if block_size < 1:
        raise UsageError(f"--trace-block-size must be at least 1 token (got {block_size})")
    if not p.is_file():
        raise UsageError(f"--trace-replay {p}: no such file")
    reader = _read_csv if fmt in _CSV else _read_jsonl
    raw = list(reader(p, fmt))
    if not raw:
        raise UsageError(f"--trace-replay {p}: no rows")
    first = min(r[1] for r in raw)
    end = math.inf if duration_s is None else start_s + duration_s
    rows = [
        TraceRow(i, (t - first - start_s) / time_scale, n_in, n_out, hashes)
        for i, (_, t, n_in, n_out, hashes) in enumerate(raw)
        if start_s <= t - first < end
    ]
    if not rows:
        raise UsageError(f"--trace-replay {p}: no row in the window --trace-start/--trace-duration")
    rows.sort(key=lambda r: (r.at_s, r.row))
    for line_no, _, n_in, _, hashes in raw:
        if hashes and len(hashes) != math.ceil(n_in / block_size):
            raise _bad(
                p,
                line_no,
                f"{len(hashes)} hash_ids for {n_in} tokens: {math.ceil(n_in / block_size)} blocks of {block_size}",
            )
    return Trace(str(p), fmt, tuple(rows), len(raw), block_size, time_scale)


def implied_hit_rate(rows: Sequence[TraceRow], block_size: int) -> float | None:
    """The prefix-cache hit rate the rows' hash ids imply (sent in order, nothing evicted): cached
    prompt tokens / prompt tokens. None when no row has hash ids."""
    if not any(r.hash_ids for r in rows):
        return None
    seen: dict[int, int] = {}  # hash id -> most tokens of that block an earlier row carried
    hits = total = 0
    for r in rows:
        total += r.input_tokens
        chained = True
        for i, h in enumerate(r.hash_ids):
            n = min(block_size, r.input_tokens - i * block_size)
            if chained:
                had = seen.get(h, 0)
                hits += min(had, n)
                chained = had >= n
            seen[h] = max(seen.get(h, 0), n)
    return hits / total if total else None


__all__ = ["FORMATS", "MOONCAKE_BLOCK", "Trace", "TraceRow", "implied_hit_rate", "load_trace"]
