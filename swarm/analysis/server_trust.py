"""The findings of server figures that failed a sanity check (swarm/analysis/server_checks.py) and of
counters that went back (pure functions).

A finding read from a figure that failed a check is withheld: in its place the diagnosis says which
check failed, at which loads, and what it does not name because of it (`withheld`). Which figures
each finding reads:
- the cause of the ceiling (swarm/analysis/bottleneck.py): running, waiting, KV usage, preemptions
  (`CAUSE_FIGURES`);
- client vs server TTFT (swarm/analysis/ttft_gap.py): the TTFT histogram (`TTFT_FIGURES`);
- the totals reconciled (swarm/analysis/reconcile.py): finished requests, tokens, the prefix cache.
Every one of them reads `family`: a run whose /metrics held the names of several families (read as
the first one `detect` names) is no one engine's figures, and gets no cause until `--server-family`
says which to read.

A counter that went back is read as Prometheus' `increase()` reads it, a restart from 0
(server_metrics.increase); `resets_finding` says so, naming the counters.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.server_families import Family
from swarm.core.server_families import family as family_of

FAMILY = "family"  # the `failed` key of a run whose /metrics held several families' names
CAUSE_FIGURES = frozenset({"running", "waiting", "kv_usage", "preemptions", FAMILY})
TTFT_FIGURES = frozenset({"ttft", FAMILY})
REQUEST_FIGURES = frozenset({"requests", FAMILY})
TOKEN_FIGURES = frozenset({"generation_tokens", FAMILY})
CACHE_FIGURES = frozenset({"prompt_tokens", "prefix_hits", "prefix_queries", FAMILY})
BadStage = tuple[StageRow, StageServerStats]
STAGES_NAMED = 3
UNTRUSTED_KINDS = (
    "server_check_failed",
    "server_counter_reset",
)  # said at a run's end as well  # a withheld finding names the failures of this many stages, then counts the rest


def figure_name(fam: Family, figure: str) -> str:
    """A figure as the family's /metrics names it ("vllm:num_requests_running")."""
    if figure == "requests":
        return fam.success[0] if fam.success else "the finished-requests counter"
    return fam.metric(figure) or figure


def failure_text(failed: Mapping[str, str], figures: Collection[str], source: str) -> str:
    """ "vllm:num_requests_running NaN in 3 of 10 scrapes; ..." for the `figures` that failed; the
    family check says which family was read and how to choose."""
    fam = family_of(source)
    parts = []
    for figure in sorted(set(failed) & set(figures)):
        if figure == FAMILY:
            parts.append(
                f"{failed[figure]}: read as {fam.title}'s (the first family the names match); "
                "give --server-family to choose"
            )
        else:
            parts.append(f"{figure_name(fam, figure)} {failed[figure]}")
    return "; ".join(parts)


def failed_stages(
    rows: Sequence[StageRow], server: Mapping[int, StageServerStats], figures: Collection[str]
) -> list[BadStage]:
    """The stages (in `rows`' order) whose server figures among `figures` failed a check."""
    return [
        (r, server[r.stage]) for r in rows if r.stage in server and set(server[r.stage].failed) & set(figures)
    ]


def withheld(bad: Sequence[BadStage], figures: Collection[str], what: Sequence[str], source: str) -> Finding:
    """The finding in place of those read from figures that failed a check: which check, where
    (stages failing alike said together), and what (`what`: "the ceiling's cause", ...) is
    therefore not named."""
    where: dict[str, list[str]] = {}
    for r, s in bad:
        where.setdefault(failure_text(s.failed, figures, source), []).append(r.label)
    named = [f"at {', '.join(labels)}: {text}" for text, labels in where.items()]
    more = f" (and {len(named) - STAGES_NAMED} more)" if len(named) > STAGES_NAMED else ""
    told = f"{what[0]} is not" if len(what) == 1 else f"neither {' nor '.join(what)} is"
    return Finding(
        "server_check_failed",
        bad[0][0].stage,
        f"The server's /metrics failed a sanity check ({'; '.join(named[:STAGES_NAMED])}{more}): "
        f"{told} named from figures that cannot be true.",
        trusted=False,
    )


def resets_finding(run_server: StageServerStats | None, source: str) -> Finding | None:
    """The counters that went back during the run, read as restarts (None: none did)."""
    if run_server is None or not run_server.resets:
        return None
    fam = family_of(source)
    which = ", ".join(
        f"{figure_name(fam, figure)} {n} time{'s' if n > 1 else ''}"
        for figure, n in sorted(run_server.resets.items())
    )
    return Finding(
        "server_counter_reset",
        None,
        f"The server's counters went back during the run ({which}): read as a restart from 0, as "
        "Prometheus' increase() reads it, the count after it added on; what the server finished between "
        "its last scrape before the restart and the restart is in no count.",
    )
