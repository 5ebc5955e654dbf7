"""Per-request records to disk, streamed: memory stays flat however long the run.

Each writer (one per worker process) buffers records and flushes them as small Parquet files
`<dir>/<part>-<n>.parquet` every `FLUSH_EVERY` records or `FLUSH_INTERVAL_S` seconds. A
complete file per flush means a SIGKILLed worker loses at most its unflushed buffer, never a
half-written file. `read_records(dir)` concatenates all parts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from swarm.records import Outcome, RequestRecord

FLUSH_EVERY = 5000
FLUSH_INTERVAL_S = 2.0

SCHEMA = pa.schema([
    ("workload", pa.string()),
    ("start_wall_s", pa.float64()),
    ("outcome", pa.string()),
    ("stage", pa.int32()),
    ("request_id", pa.string()),
    ("http_status", pa.int32()),
    ("ttft_s", pa.float64()),
    ("ttfa_s", pa.float64()),
    ("e2e_s", pa.float64()),
    ("tpot_s", pa.float64()),
    ("itl_s", pa.list_(pa.float64())),
    ("prompt_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("reasoning_tokens", pa.int64()),
    ("tokens_from_usage", pa.bool_()),
    ("finish_reason", pa.string()),
    ("error", pa.string()),
    ("send_lag_s", pa.float64()),
    ("warmup", pa.bool_()),
])
_FIELDS = [f.name for f in fields(RequestRecord)]  # test_recorder checks SCHEMA matches


def _warm_up() -> None:
    """Pay Parquet's lazy one-off initialisation (~0.3 s) now, not at the first flush mid-run."""
    pq.write_table(SCHEMA.empty_table(), pa.BufferOutputStream())


class RecordWriter:
    """Buffers records and writes them as Parquet parts under `directory`."""

    def __init__(self, directory: Path, part_name: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.part_name = part_name
        self.written = 0
        self._parts = 0
        self._columns: dict[str, list] = {name: [] for name in _FIELDS}
        self._buffered = 0
        self._last_flush = time.monotonic()
        _warm_up()

    def add(self, record: RequestRecord) -> None:
        cols = self._columns
        for name in _FIELDS:
            cols[name].append(getattr(record, name))
        self._buffered += 1
        if self._buffered >= FLUSH_EVERY or time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._buffered:
            return
        cols = self._columns
        cols["outcome"] = [str(o) for o in cols["outcome"]]
        table = pa.Table.from_pydict(cols, schema=SCHEMA)
        self._parts += 1
        final = self.directory / f"{self.part_name}-{self._parts:05d}.parquet"
        tmp = final.with_suffix(".tmp")
        pq.write_table(table, tmp)
        tmp.replace(final)  # atomic: a reader never sees a half-written part
        self.written += self._buffered
        self._columns = {name: [] for name in _FIELDS}
        self._buffered = 0

    def close(self) -> None:
        self.flush()


def part_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob("*.parquet"))


def read_table(directory: Path) -> pa.Table:
    """All records under `directory` as one Arrow table (empty table when there are none)."""
    parts = part_files(directory)
    if not parts:
        return SCHEMA.empty_table()
    return pa.concat_tables(pq.read_table(p, schema=SCHEMA) for p in parts)


def read_records(directory: Path) -> list[RequestRecord]:
    table = read_table(directory)
    out = []
    for row in table.to_pylist():
        row["outcome"] = Outcome(row["outcome"])
        out.append(RequestRecord(**row))
    return out


def write_records(records: Iterable[RequestRecord], path: Path) -> int:
    """Write records to one Parquet file (used to merge parts into `requests.parquet`)."""
    cols: dict[str, list] = {name: [] for name in _FIELDS}
    n = 0
    for r in records:
        for name in _FIELDS:
            cols[name].append(getattr(r, name))
        n += 1
    cols["outcome"] = [str(o) for o in cols["outcome"]]
    pq.write_table(pa.Table.from_pydict(cols, schema=SCHEMA), path)
    return n
