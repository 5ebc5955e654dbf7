"""Units: time spans in and durations out, and run ids. Pure; every layer formats through here.

- `parse_duration("250ms")`: the one duration syntax (250ms, 1.5s, 2m, 1h30m, 500us; a bare number
  is seconds), to seconds (a float);
- `parse_timespan("1h20m")`: the same where only whole seconds count (Locust's -t, stage times);
- `seconds_text(0.085)` -> "85ms" (below `switch_s`, milliseconds; above, seconds), with the
  separator and digits each caller's context wants ("85 ms" in prose, "85.0ms" in SLO lines);
- `seconds_span(0.08, 0.1)` -> "80-100ms": a histogram bucket, the most a bucket can say;
- `ms_number(0.0853)` -> "85": a table cell whose column header carries the unit;
- `percent_text(0.5)` -> "50%";
- `stage_number(0)` -> 1, `stage_name(0)` -> "stage 1": a stage as a person reads it. The 0-based
  index is the key in records, summary.json (`stage`), diagnosis.json and stages.csv; every label
  (live line, tables, report, figures, web UI, logs, summary.json `name`) counts from 1;
- `new_run_id()` / `check_run_id(text)`: the run id that labels /metrics and names run directories.
"""

from __future__ import annotations

import math
import re
import secrets
import time

from swarm.core.errors import UsageError

_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:h|ms|us|m|s))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|m|s)")
_DURATION_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
_RUN_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


def parse_timespan(text: str | int, option: str | None = None) -> int:
    """A span in whole seconds, written as every duration is (`parse_duration`: 20, 20s, 3m, 1h20m,
    1.5m, 2000ms) -> seconds. Raises UsageError (prefixed with `option` when given), also on a span
    that is not a whole number of seconds (1500ms) where only seconds count."""
    where = f"{option}: " if option else ""
    text = str(text).strip()
    if text.isdigit():
        return int(text)
    if not re.fullmatch(r"\d+(?:\.\d+)?", text) and not _DURATION.match(text):
        raise UsageError(f"{where}bad time {text!r}: use e.g. 30s, 5m, 1h30m")
    seconds = parse_duration(text, option)
    if abs(seconds - round(seconds)) > 1e-9:
        raise UsageError(f"{where}{text!r} is not a whole number of seconds: use e.g. 30s, 5m, 1h30m")
    return round(seconds)


def parse_duration(text: str | float, option: str | None = None) -> float:
    """A span that may be under a second: 250ms, 0.5s, 1m30s, 800us, 2 (seconds) -> seconds. Raises UsageError
    (prefixed with `option` when given)."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    if not _DURATION.match(text):
        where = f"{option}: " if option else ""
        raise UsageError(f"{where}bad time {text!r}: use e.g. 250ms, 1.5s, 2m")
    return sum(float(n) * _DURATION_UNIT_S[u] for n, u in _DURATION_PART.findall(text))


def parse_share(text: str, flag: str) -> float:
    """`95%` or `0.95` -> 0.95 (0 < share <= 1). Raises UsageError naming `flag`."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"bad {flag} {text!r}: give a share, e.g. 95% or 0.95") from None
    if not 0 < v <= 1:
        raise UsageError(f"bad {flag} {text!r}: must be above 0% and at most 100%")
    return v


def seconds_text(
    v: float | None, *, sep: str = "", ms_digits: int = 0, s_digits: int = 1, switch_s: float = 10.0
) -> str:
    """A duration in seconds as text: milliseconds below `switch_s`, seconds from there; "-" for None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v < switch_s:
        return f"{v * 1000:.{ms_digits}f}{sep}ms"
    return f"{v:.{s_digits}f}{sep}s"


def seconds_span(lo: float, hi: float) -> str:
    """A bucket (lo, hi] as text: "80-100ms", "1-2.5s", "500ms-1s", ">2560000ms" for the last one."""
    if math.isinf(hi):
        return f">{lo * 1000:.0f}ms"
    if lo >= 1.0:
        return f"{lo:g}-{hi:g}s"
    return f"{lo * 1000:.0f}-{hi * 1000:.0f}ms" if hi < 1.0 else f"{lo * 1000:.0f}ms-{hi:g}s"


def ms_number(v: float | None, *, thousands: bool = True) -> str:
    """Seconds as a whole number of milliseconds, for a cell under an "(ms)" header; "-" for None/NaN."""
    if v is None or v != v:
        return "-"
    return f"{v * 1000:,.0f}" if thousands else f"{v * 1000:.0f}"


def percent_text(v: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: 0.5 -> "50%"; "-" for None/NaN."""
    return "-" if v is None or v != v else f"{v * 100:.{digits}f}%"


def stage_number(index: int) -> int:
    """The stage's number as every label shows it: its 0-based index + 1."""
    return int(index) + 1


def stage_name(index: int) -> str:
    """For stage index 2: "stage 3" (see `stage_number`)."""
    return f"stage {stage_number(index)}"


def new_run_id() -> str:
    """YYYYmmdd-HHMMSS-xxxx: sorts by start time, unique enough across a team's runs."""
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """A run id given by the user: it becomes a label value and a directory name."""
    if not _RUN_ID.match(run_id):
        raise UsageError(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-' only")
    return run_id
