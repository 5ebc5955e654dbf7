"""When a target went away: the run ended with its connections refused (pure, on aggregate cells).

An endpoint went away when its last `connect_error` came after its last answer: since its first
refusal after that answer (the end of the last answer, when it had also refused before), else
never. With several endpoints (`--host URL1,URL2`) each is judged on its own, and the target as a
whole went away only when every endpoint did (the latest of them): one still answering is a target
that answers, and the others' loss is told per endpoint.

A run whose every request went unanswered (`no_answer_line`, on summary.json's total) fails: the
master's exit code and `swarm run`'s closing lines say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm.core.records import Outcome
from swarm.stats.aggregate import Aggregate, Cell


def unreachable_since(cell: Cell) -> float | None:
    """When `cell`'s target went away (time.time()), if its requests ended refused; else None."""
    last_refused = cell.last_connect_error_s
    if last_refused is None:
        return None
    answered = cell.last_response_s
    if answered is not None and answered >= last_refused:
        return None  # it answered again after its last refusal
    first = cell.first_connect_error_s
    return first if answered is None or first is None else max(first, answered)


def endpoints_unreachable_since(agg: Aggregate) -> dict[str, float | None]:
    """Endpoint label -> when it went away (None: it still answered at the end)."""
    return {e: unreachable_since(agg.combined(endpoint=e)) for e in agg.endpoints()}


def target_unreachable_since(agg: Aggregate) -> float | None:
    """When the whole target went away: every endpoint did (the latest), else None."""
    lost = endpoints_unreachable_since(agg)
    if not lost or any(t is None for t in lost.values()):
        return None
    return max(t for t in lost.values() if t is not None)


UNANSWERED = (Outcome.CANCELLED, Outcome.TIMEOUT, Outcome.CONNECT_ERROR)
"""Requests that got no answer from the target: cut by the stop, no byte in time, no connection.
Any other end (ok, an HTTP error, an error event, a cut or bad stream) is the target's answer."""


def no_answer_line(total: Mapping[str, Any]) -> str | None:
    """The line for a run whose every request sent went unanswered (`total`: summary.json's total
    block), or None when one was answered or none was sent."""
    sent = total.get("requests", 0)
    counts = {**total.get("failures", {}), Outcome.CANCELLED.value: total.get("cancelled", 0)}
    ends = {o.value: counts.get(o.value, 0) for o in UNANSWERED}
    if sent == 0 or sum(ends.values()) < sent:
        return None
    why = ", ".join(f"{n} {name}" for name, n in ends.items() if n)
    return (
        f"swarm: no request completed: {sent} sent, {why} (cancelled: still in flight at the stop, "
        "see --stop-timeout; timeout: no byte within --request-timeout or past --request-deadline)"
    )
