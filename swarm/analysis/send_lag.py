"""`late_sends` findings: open-loop stages whose requests left their schedule late, so the server got
another load than the one asked for (issue 40).

An open-loop stage promises arrivals at its rate, on a schedule drawn before the run (Poisson or
constant). A request that leaves late arrives in a burst the schedule did not have, and a stage whose
requests were held back (the in-flight cap `-u` reached, a worker's event loop busy) sent fewer than
it asked: every latency measured there was measured under that other load. The stage is flagged the
way a CPU-bound worker's is (`client_bound`): named, and its latencies not trusted.

The bar is held to the send lag's p99 (`send_lag_s`, each request's send time less its scheduled
instant): SEND_LAG_MAX_S, or $SWARM_SEND_LAG_MAX (`25ms`, `0.1`) for a stricter or a looser one. A
stage of fewer than P99_MIN_REQUESTS requests is held by its median instead: there the p99 is its
single worst request, and one request late at the run's start (the users starting, the first
connections) does not make 16 requests at 2 req/s another load.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from swarm.analysis.finding import Finding, StageRow, prose_number, prose_seconds
from swarm.core.units import parse_duration

SEND_LAG_MAX_S = 0.05  # a stage whose requests left more than this late at p99 is not the load asked for
LIMIT_ENV = "SWARM_SEND_LAG_MAX"
P99_MIN_REQUESTS = 100  # below this the p99 is the worst request: the median is judged
HELD_BACK = 0.95  # sent under this share of the asked rate: the in-flight cap held requests back


def send_lag_limit() -> float:
    """The bar in seconds: $SWARM_SEND_LAG_MAX when set (a UsageError names it when it is no
    duration), else SEND_LAG_MAX_S."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    return parse_duration(text, f"${LIMIT_ENV}") if text else SEND_LAG_MAX_S


def late_sends(rows: Sequence[StageRow], limit_s: float | None = None) -> list[Finding]:
    """One untrusted finding per open-loop stage whose send lag p99 (its median under
    P99_MIN_REQUESTS requests) exceeded `limit_s` (default `send_lag_limit()`): how late, what it
    sent against what it asked, and what to change."""
    bar = send_lag_limit() if limit_s is None else limit_s
    out = []
    for r in rows:
        tail = r.requests >= P99_MIN_REQUESTS
        judged = r.send_lag_p99 if tail else r.send_lag_p50
        if r.rate is None or judged is None or judged <= bar:
            continue
        sent = r.sent_rate
        worst = f", max {prose_seconds(r.send_lag_max)}" if r.send_lag_max is not None else ""
        got = "" if sent is None else f"; it sent {prose_number(sent)} req/s of the {r.rate:g} asked for"
        held = sent is not None and sent < HELD_BACK * r.rate
        fix = (
            f"raise -u (at most {r.users} requests were in flight) or add --workers"
            if held and r.users is not None
            else "add --workers (the event loop was late, not the in-flight cap)"
        )
        out.append(
            Finding(
                "late_sends",
                r.stage,
                f"At {r.label} requests left late: send lag {'p99' if tail else 'p50'} {prose_seconds(judged)}"
                f"{worst} (on time is {'p99' if tail else 'p50'} within {prose_seconds(bar)}){got}. The server saw another load than "
                f"the one asked for — {fix}; this stage's latencies are not trusted.",
                trusted=False,
            )
        )
    return out
