"""Per-request records to disk, streamed: memory stays flat however long the run.

Each writer (one per worker process) buffers records and flushes them as small Parquet files
`<dir>/<part>-<n>.parquet` every `FLUSH_EVERY` records or `FLUSH_INTERVAL_S` seconds. A
complete file per flush means a SIGKILLed worker loses at most its unflushed buffer, never a
half-written file. `read_records(dir)` concatenates all parts.

The writer runs on the load generator's event loop, where a pause is a timing error for every
stream in flight: a flush of 4,000 records used to hold the loop for 20-40 ms (Arrow conversion
~1.3 us a row, then Parquet encoding and the file write). So rows are converted to Arrow in
batches of `BATCH_ROWS` as they come (a ~0.3 ms pause each), and with `background=True` (the
plugin, in a gevent process) the encoding and writing run in a native thread of gevent's pool,
which pyarrow runs without the GIL; one write at a time, in order, waited for by `close()`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from swarm.core.recordfile import FIELDS, SCHEMA, write_part
from swarm.core.records import RequestRecord

FLUSH_EVERY = 5000
FLUSH_INTERVAL_S = 2.0
BATCH_ROWS = 256  # rows converted to Arrow at a time (~0.3 ms on the event loop)


def _warm_up() -> None:
    """Pay Parquet's lazy one-off initialisation (~0.3 s) now, not at the first flush mid-run."""
    pq.write_table(SCHEMA.empty_table(), pa.BufferOutputStream())


class RecordWriter:
    """Buffers records and writes them as Parquet parts under `directory`.

    `background=True`: encode and write each part in gevent's native thread pool (the caller is
    a gevent process); `flush()` and `close()` still return only once the part is on disk.
    """

    def __init__(self, directory: Path, part_name: str, background: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.part_name = part_name
        self.written = 0  # records handed to a part write (all of them on disk after close())
        self._parts = 0
        self._columns: dict[str, list] = {name: [] for name in FIELDS}
        self._rows = 0  # rows in _columns, not yet converted
        self._batches: list[pa.RecordBatch] = []
        self._buffered = 0  # rows not yet handed to a write (_columns + _batches)
        self._last_flush = time.monotonic()
        self._pool: Any = None
        self._writing: Any = None  # the write in flight (gevent AsyncResult)
        if background:
            import gevent

            self._pool = gevent.get_hub().threadpool
        _warm_up()

    def add(self, record: RequestRecord) -> None:
        cols = self._columns
        for name in FIELDS:
            cols[name].append(getattr(record, name))
        self._rows += 1
        self._buffered += 1
        if self._rows >= BATCH_ROWS:
            self._convert()
        if self._buffered >= FLUSH_EVERY or time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
            self._flush(wait=False)

    def _convert(self) -> None:
        if not self._rows:
            return
        cols = self._columns
        cols["outcome"] = [str(o) for o in cols["outcome"]]
        self._batches.append(pa.RecordBatch.from_pydict(cols, schema=SCHEMA))
        self._columns = {name: [] for name in FIELDS}
        self._rows = 0

    def flush(self) -> None:
        """Write what is buffered as one part and wait until it is on disk."""
        self._flush(wait=True)

    def _flush(self, wait: bool) -> None:
        self._last_flush = time.monotonic()
        if self._buffered:
            self._convert()
            table = pa.Table.from_batches(self._batches, schema=SCHEMA)
            self._batches = []
            self._parts += 1
            final = self.directory / f"{self.part_name}-{self._parts:05d}.parquet"
            self._wait()  # one write at a time: parts land in order
            if self._pool is None:
                write_part(table, final)
            else:
                self._writing = self._pool.spawn(write_part, table, final)
            self.written += self._buffered
            self._buffered = 0
        if wait:
            self._wait()

    def _wait(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.get()  # (re-raises the write's error)

    def close(self) -> None:
        self.flush()
