"""The per-request records on disk: one Parquet schema, the part files, readers and a merge writer.

Workers write parts `<dir>/<part>-<n>.parquet` (swarm/live/recorder.py `RecordWriter`);
`swarm run` merges them into `requests.parquet` and the report reads either. Pure I/O of the
format, no Locust: every layer that reads records reads them here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from swarm.core.records import Outcome, RequestRecord

SCHEMA = pa.schema(
    [
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
        ("itl_dropped", pa.int64()),
        ("itl_dropped_sum_s", pa.float64()),
        ("itl_dropped_max_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("tokens_from_usage", pa.bool_()),
        ("finish_reason", pa.string()),
        ("error", pa.string()),
        ("send_lag_s", pa.float64()),
        ("warmup", pa.bool_()),
        ("request_class", pa.string()),
        ("model", pa.string()),
        ("endpoint", pa.string()),
        ("session_id", pa.string()),
        ("turn", pa.int32()),
        ("trace_row", pa.int64()),
        ("task_id", pa.string()),
        ("step", pa.int32()),
        ("tool_calls", pa.int32()),
        ("tool_calls_valid", pa.int32()),
        ("tool_error", pa.string()),
        ("ttftc_s", pa.float64()),
        ("tool_s", pa.float64()),
        ("task_s", pa.float64()),
    ]
)
FIELDS = [f.name for f in fields(RequestRecord)]  # test_recorder checks SCHEMA matches


def write_part(table: pa.Table, final: Path) -> None:
    tmp = final.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(final)  # atomic: a reader never sees a half-written part


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
        row["request_class"] = row["request_class"] or "direct"  # parts written before these columns
        row["model"] = row["model"] or ""
        row["endpoint"] = row["endpoint"] or ""
        row["itl_dropped"] = row["itl_dropped"] or 0  # parts written before ITL was capped
        out.append(RequestRecord(**row))
    return out


def write_records(records: Iterable[RequestRecord], path: Path) -> int:
    """Write records to one Parquet file (used to merge parts into `requests.parquet`)."""
    cols: dict[str, list] = {name: [] for name in FIELDS}
    n = 0
    for r in records:
        for name in FIELDS:
            cols[name].append(getattr(r, name))
        n += 1
    cols["outcome"] = [str(o) for o in cols["outcome"]]
    pq.write_table(pa.Table.from_pydict(cols, schema=SCHEMA), path)
    return n
