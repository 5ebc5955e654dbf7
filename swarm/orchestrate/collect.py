"""`swarm run` after the run: merge the workers' record parts into `DIR/requests.parquet`, print the
results table, the SLO lines and (for a search) its answer and why, write summary.json once (the
master's summary, which it wrote as a part, with the search's why added: swarm/orchestrate/outdir.py
`publish_summary`), write the report, and turn a worker that failed mid-run into the run's exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from swarm.core.runfiles import RECORDS_DIR, REQUESTS, SUMMARY
from swarm.orchestrate import outdir
from swarm.orchestrate.plan import RunPlan
from swarm.orchestrate.processes import Processes
from swarm.orchestrate.waiting import worker_failures

if TYPE_CHECKING:  # (imported where used: `swarm run` starts without pandas)
    from swarm.analysis.finding import Finding
    from swarm.analysis.rundir import RunData
    from swarm.stats.summary import Summary


def finish(plan: RunPlan, master_code: int, procs: Processes, quit_early: set[str] | None = None) -> int:
    """Merge record parts, print the table and SLO lines, write summary.json (once: the master's,
    the search's why added), say where everything is."""
    summary = outdir.master_summary(plan.out, plan.run_id)  # this run's, never an earlier one's
    completed = False
    try:
        master_code, n = _merge(plan, master_code, procs, quit_early or set())
        if summary is None:
            print(
                f"swarm: no summary was written (master exit {master_code}); master log tail:\n"
                f"{procs.log_tail('master')}",
                file=sys.stderr,
            )
            return master_code or 1
        _print_results(plan, summary)
        from swarm.analysis.rundir import load_run

        data = load_run(plan.out, cast("Summary", summary))  # once: the why, summary.json, the report
        if data.summary.get("search"):
            completed = print_search(data)
    finally:
        if summary is not None:  # even on an error above: the master's summary is the run's
            outdir.publish_summary(plan.out, summary, completed)
    from swarm.analysis.report import write_run_report

    report, found = write_run_report(data, slo=None if plan.search else plan.slo)
    if len(plan.hosts) > 1:
        for line in endpoint_lines(found):
            print(f"swarm: {line}")
    for line in untrusted_lines(found):
        print(f"swarm: {line}", file=sys.stderr)
    print(
        f"swarm: {n} request records in {plan.out / REQUESTS}; summary in {plan.out / SUMMARY}; report in {report}"
    )
    return master_code


def _merge(plan: RunPlan, master_code: int, procs: Processes, quit_early: set[str]) -> tuple[int, int]:
    """The workers that failed said (and the run's code made of them), the record parts merged into
    DIR/requests.parquet: (the run's code, the number of records)."""
    from swarm.core import recordfile as recorder

    failed = worker_failures(procs, quit_early)
    for name, code, line in failed:
        print(f"swarm: {name} exited {code}: {line}", file=sys.stderr)
    if failed and master_code == 0:  # a run some worker could not take part in is not a success
        master_code = 2 if all(code == 2 for _, code, _ in failed) else 1
    records_dir = plan.out / RECORDS_DIR
    n = 0
    if recorder.part_files(records_dir):
        table = recorder.read_table(records_dir)
        import pyarrow.parquet as pq

        pq.write_table(table, plan.out / REQUESTS)
        n = table.num_rows
    return master_code, n


def _print_results(plan: RunPlan, summary: dict) -> None:
    """The results table, its intervals, the replay's and SLO lines, the target's loss, the
    dialect's misreadings and the search's early ends: what the master's summary says."""
    from swarm.analysis.search import early_ends
    from swarm.analysis.table import render, render_ci
    from swarm.client.mismatch import logged_lines
    from swarm.stats.reachability import no_answer_line
    from swarm.stats.trace_replay import replay_lines

    print(render(summary))
    if (intervals := render_ci(summary)) is not None:
        print(intervals)
    for line in replay_lines(summary):
        print(line)
    for line in summary.get("slo", []) or []:
        print(line if isinstance(line, str) else line.get("text", ""))
    if summary.get("target_unreachable_since"):
        print(
            f"swarm: the target went away at {summary['target_unreachable_since']}; "
            "every later request failed to connect"
        )
    if (unanswered := no_answer_line(summary.get("total") or {})) is not None:
        print(unanswered)  # (the master's exit code says it too)
    for line in logged_lines(p.read_text(errors="replace") for p in sorted(plan.out.glob("*.log"))):
        print(f"swarm: {line}", file=sys.stderr)  # a dialect that misread the streams (once per run)
    for line in early_ends(summary):
        print(f"swarm: {line}")


def endpoint_lines(found: Sequence[Finding]) -> list[str]:
    """Several endpoints: of the report's findings, each endpoint's cause, the causes side by side
    and each endpoint that stopped answering (swarm/analysis/endpoints.py)."""
    from swarm.analysis.endpoints import CAUSES

    return [
        f.text
        for f in found
        if f.kind in ("endpoints_differ", "endpoint_down")
        or (f.kind in CAUSES and f.text.startswith("endpoint "))
    ]


def untrusted_lines(found: Sequence[Finding]) -> list[str]:
    """Of the report's findings, those saying the server's /metrics failed a sanity check or that its
    counters went back (swarm/analysis/server_trust.py): said at the run's end, not only in the report."""
    from swarm.analysis.server_trust import UNTRUSTED_KINDS

    return [
        f.text for f in found if f.kind in UNTRUSTED_KINDS or (f.kind == "client_vs_server" and not f.trusted)
    ]


def print_search(data: RunData) -> bool:
    """The search's answer and, from the server's metrics, why (with several endpoints: each
    endpoint's cause at the answer); the reason goes into `data.summary` too, which summary.json
    and the report are then made of. Whether a reason was found (and added)."""
    from swarm.analysis.search import bottleneck

    summary = data.summary
    search = summary["search"]
    print(f"swarm: {search.get('headline')}")
    if data.endpoints:
        whys = [(label, bottleneck(sub)) for label, sub in data.endpoints.items()]
        found = [(label, w) for label, w in whys if w is not None]
        if not found:
            return False
        kinds = {w.kind for _, w in found}
        text = " ".join(f"endpoint {label}: {w.text}" for label, w in found)
        print(f"swarm: why: {text}")
        search["why"], search["why_kind"] = text, kinds.pop() if len(kinds) == 1 else "endpoints_differ"
        return True
    why = bottleneck(data)
    if not why:
        return False
    print(f"swarm: why: {why.text}")  # the finding's own sentence, once; its kind apart in summary.json
    search["why"], search["why_kind"] = why.text, why.kind
    return True
