"""Several endpoints in one run (`--host URL1,URL2,...`): each endpoint diagnosed on its own, the
causes set side by side, and an endpoint that stopped answering named (pure functions over a
loaded run, swarm/analysis/rundir.py).

`run_findings(data)` is the run's whole diagnosis: the whole run's findings (its client side: the
ceiling, the client's CPU, the SLO; with several endpoints no server's numbers speak for the
whole), then each endpoint's own, read by the same rules (`rundir.findings` on its sub-run: its
records, its scrapes, the run's stage windows), each sentence starting "endpoint LABEL: ", then
one sentence per cause that some endpoints show and others not ("endpoint B is KV-bound,
endpoint A is not"), then one per endpoint that stopped answering (`outages`).

An endpoint stopped answering when, after its last answered request (by send time), every
request sent to it failed and the last one could not connect: the server went away and stayed
away. Its time is that of the first of those failures; they are counted by outcome, with the
connection errors' most common message.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from swarm.analysis.finding import Finding
from swarm.analysis.rundir import RunData, findings
from swarm.core.records import Outcome

# the causes set side by side across endpoints, and how a sentence names each
CAUSES = {
    "max_num_seqs_cap": "sequence-capped (running pinned at its scheduler's cap)",
    "kv_bound": "KV-bound",
    "compute_bound": "compute-bound",
    "outside_engine": "held outside its engine",
    "frontend_bound": "held in its API front-end",
}
UNJUDGED = frozenset({"server_check_failed", "no_server_metrics"})  # an endpoint's causes not told


def endpoint_prefix(label: str) -> str:
    """How an endpoint's own finding starts: "endpoint LABEL: "."""
    return f"endpoint {label}: "


def diagnose_endpoints(data: RunData) -> dict[str, list[Finding]]:
    """label -> that endpoint's findings by the run's own rules, on its records and scrapes alone."""
    return {label: findings(sub) for label, sub in data.endpoints.items()}


def run_findings(data: RunData, slo: str | None = None) -> list[Finding]:
    """The whole run's findings, then (several endpoints) each endpoint's, their contrasts and
    outages. One endpoint: `rundir.findings` as it is."""
    whole = findings(data, slo)
    if not data.endpoints:
        return whole
    whole = [f for f in whole if f.kind != "no_server_metrics"]  # the endpoints' own come below
    per = diagnose_endpoints(data)
    own = [
        Finding(f.kind, f.stage, endpoint_prefix(label) + f.text, f.trusted)
        for label, found in per.items()
        for f in found
    ]
    return whole + own + contrasts(per) + [outage_finding(o, _run_start(data)) for o in outages(data.records)]


def contrasts(per: dict[str, list[Finding]]) -> list[Finding]:
    """One finding per cause that some endpoints show (on a trusted finding) and others do not; an
    endpoint whose diagnosis could not judge causes (`UNJUDGED`: its server figures failed a sanity
    check, or none were scraped) is said not told, never "is not"."""
    out = []
    for kind, words in CAUSES.items():
        has = [label for label, found in per.items() if any(f.kind == kind and f.trusted for f in found)]
        unjudged = [label for label, found in per.items() if label not in has and _unjudged(found)]
        hasnt = [label for label in per if label not in has and label not in unjudged]
        if has and (hasnt or unjudged):
            parts = [f"{_names(has)} {'is' if len(has) == 1 else 'are'} {words}"]
            if hasnt:
                parts.append(f"{_names(hasnt)} {'is' if len(hasnt) == 1 else 'are'} not")
            if unjudged:
                whose = "its" if len(unjudged) == 1 else "their"
                parts.append(
                    f"{_names(unjudged)}: not told ({whose} server figures failed a sanity check or were "
                    "not scraped)"
                )
            out.append(Finding("endpoints_differ", None, "; ".join(parts) + "."))
    return out


def _unjudged(found: list[Finding]) -> bool:
    """An endpoint's diagnosis named no cause for want of server figures it could trust."""
    return any(f.kind in UNJUDGED for f in found)


def _names(labels: list[str]) -> str:
    return ("endpoint " if len(labels) == 1 else "endpoints ") + ", ".join(labels)


@dataclass(frozen=True)
class Outage:
    """An endpoint that stopped answering: from `since_s` (wall clock) on, `failed` requests failed."""

    label: str
    since_s: float
    failed: int
    by_outcome: dict[str, int]
    message: str | None  # the most common connection error's message


def outages(records: Any) -> list[Outage]:
    """The endpoints (records' `endpoint` column) whose requests after their last answered one all
    failed, the last of them unable to connect; in the order of their labels."""
    if records is None or not len(records) or "endpoint" not in records.columns:
        return []
    out = []
    for label, df in records[records["outcome"] != Outcome.CANCELLED.value].groupby("endpoint", sort=True):
        df = df.sort_values("start_wall_s")
        ok = df["outcome"] == Outcome.OK.value
        tail = df.iloc[int(ok.to_numpy().nonzero()[0].max()) + 1 :] if ok.any() else df
        if not len(tail) or tail["outcome"].iloc[-1] != Outcome.CONNECT_ERROR.value:
            continue
        ends = tail["start_wall_s"] + tail["e2e_s"].fillna(0.0)
        connect = tail.loc[tail["outcome"] == Outcome.CONNECT_ERROR.value, "error"].dropna()
        message = Counter(connect).most_common(1)[0][0] if len(connect) else None
        counts = {str(k): int(v) for k, v in tail["outcome"].value_counts().items()}
        out.append(Outage(str(label), float(ends.min()), len(tail), counts, message))
    return out


def outage_text(o: Outage, run_start_s: float | None = None) -> str:
    """ "endpoint X stopped answering at HH:MM:SS UTC (T s into the run): N requests failed (...)"."""
    at = datetime.fromtimestamp(o.since_s, UTC).strftime("%H:%M:%S UTC")
    into = f" ({o.since_s - run_start_s:.1f} s into the run)" if run_start_s is not None else ""
    reasons = "; ".join(
        f"{kind} {n}" + (f": {o.message}" if kind == Outcome.CONNECT_ERROR.value and o.message else "")
        for kind, n in sorted(o.by_outcome.items(), key=lambda kv: -kv[1])
    )
    return (
        f"endpoint {o.label} stopped answering at {at}{into}: {o.failed} request"
        f"{'s' if o.failed != 1 else ''} failed ({reasons})"
    )


def outage_finding(o: Outage, run_start_s: float | None = None) -> Finding:
    return Finding("endpoint_down", None, outage_text(o, run_start_s) + ".")


def _run_start(data: RunData) -> float | None:
    starts = [r.start_s for r in data.rows if r.start_s is not None]
    if starts:
        return min(starts)
    df = data.records
    return float(df["start_wall_s"].min()) if df is not None and len(df) else None
