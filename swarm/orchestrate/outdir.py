"""The run directory (`--out`): one run's files, never two runs' mixed.

`swarm run` merges every record part under DIR/records and reports DIR/summary.json: a second run
into the same directory would add its records to the first's (a table of 2,681 records under a
summary of 1,342), and after a crash the previous run's summary would be printed as this one's.
So a run claims its directory first: a directory that already holds a run is refused (one line,
exit 2) unless `--overwrite` is given, and then only a directory holding nothing but a run's files
is emptied; the run writes DIR/run.json (its id) before anything else, and `finish` reports a
summary only if it carries this run's id.

summary.json is written once, complete: the master writes its summary as DIR/summary.part.json
(`--summary-part`), and `finish` publishes it as summary.json, with the search's why added where
there is one (`publish_summary`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import time
from pathlib import Path

from swarm.core.errors import UsageError
from swarm.core.runfiles import (
    MASTER_LOG,
    RECORDS_DIR,
    REPEAT_JSON,
    REQUESTS,
    RUN_MARKER,
    SUMMARY,
    SUMMARY_PART,
    repeat_dir_name,
)

# What a run (or a --repeat series) writes into its directory: nothing else is ever removed.
RUN_FILES = ("*.log", "*.json", "*.jsonl", "*.csv", "*.html", "*.parquet", "*.png", "*.txt", "*.tmp")
RUN_DIRS = (RECORDS_DIR, repeat_dir_name("*"))
EVIDENCE = (RUN_MARKER, SUMMARY, REQUESTS, RECORDS_DIR, MASTER_LOG, REPEAT_JSON, repeat_dir_name(1))


def previous_run(out: Path) -> str | None:
    """What earlier run `out` holds ("run ID", or "an earlier run"), None if it holds none."""
    if not out.is_dir():
        return None
    for name in (RUN_MARKER, SUMMARY):
        path = out / name
        if path.is_file():
            try:
                run_id = json.loads(path.read_text()).get("run_id")
            except (OSError, ValueError, AttributeError):
                run_id = None
            return f"run {run_id}" if run_id else "an earlier run"
    if any((out / name).exists() for name in EVIDENCE):
        return "an earlier run"
    return None


def _is_run_file(path: Path) -> bool:
    patterns = RUN_DIRS if path.is_dir() else RUN_FILES
    return any(fnmatch.fnmatch(path.name, p) for p in patterns)


def claim(out: Path, run_id: str, *, overwrite: bool) -> None:
    """Make `out` this run's: refuse another run's directory (UsageError) unless `overwrite`, then
    create it and write the marker. UsageError, too, for a path that is a file or not writable."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    earlier = previous_run(out)
    if earlier is not None:
        if not overwrite:
            raise UsageError(
                f"--out {out} already holds {earlier}: give a new directory, or --overwrite to replace it"
            )
        strangers = sorted(p.name for p in out.iterdir() if not _is_run_file(p))
        if strangers:
            raise UsageError(
                f"--out {out} holds files no run wrote ({', '.join(strangers[:3])}); "
                "not removing them: give a new directory"
            )
        for p in out.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
        marker = {"run_id": run_id, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (out / RUN_MARKER).write_text(json.dumps(marker) + "\n")
    except OSError as e:
        raise UsageError(f"--out {out} cannot be written: {e.strerror or e}") from None


def master_summary(out: Path, run_id: str) -> dict | None:
    """The master's summary (DIR/summary.part.json) if this run's master wrote it (its run id), else
    None."""
    path = out / SUMMARY_PART
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or summary.get("run_id") != run_id:
        return None
    return summary


def publish_summary(out: Path, summary: dict, completed: bool) -> None:
    """DIR/summary.json, written once: the master's part renamed (its bytes as the master wrote
    them), or, `completed` (the search's why added to `summary`), `summary` written in its place."""
    from swarm.stats.summary import write

    part = out / SUMMARY_PART
    if completed:
        write(summary, out / SUMMARY)
        part.unlink(missing_ok=True)
    else:
        os.replace(part, out / SUMMARY)
