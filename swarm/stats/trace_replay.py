"""The end-of-run lines of a trace replay (`--trace-replay`), from summary.json (pure).

`swarm run`, the master and the report print the same lines: rows sent (and any sent twice or not
at all), rows re-assigned from lost workers, the send lag's p50/p99, and each worker that sent
rows later than `--trace-max-lag` behind the trace's schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.core.units import seconds_text


def replay_lines(summary: Mapping[str, Any]) -> list[str]:
    """[] when the run was no trace replay."""
    s = summary.get("trace_replay")
    if not s:
        return []
    lost = s["reassigned_from"]
    lag = (summary.get("total") or {}).get("send_lag_s") or {}
    out = [
        f"swarm: trace replay: {s['sent']} of {s['rows']} rows sent ({s['unsent']} unsent, "
        f"{s['duplicates']} twice), send lag p50 {seconds_text(lag.get('p50'))} p99 {seconds_text(lag.get('p99'))}, "
        f"{s['reassigned']} re-assigned from lost workers"
        + (
            f" ({', '.join(f'{w}: {n}' for w, n in lost.items())}; sent up to "
            f"{s['reassigned_max_lag_s']:.3f} s late)"
            if lost
            else ""
        )
    ]
    for b in s["behind"]:
        out.append(
            f"swarm: trace replay fell behind: worker {b['worker']} sent {b['late']} of {b['sent']} rows "
            f"more than {s['max_lag_bound_s']:g} s late (max {b['max_lag_s']:.3f} s)"
        )
    return out
