"""Goodput: per-request SLOs (`--goodput "ttft<=500ms,tpot<=50ms,e2e<=10s"`), the per-request check.

A request is *good* when every given objective holds for it, as vLLM's `bench serve --goodput`
and AIPerf's `--goodput` define it (REFERENCE.md §9). Pure: no I/O, no Locust.

- Metrics: `ttft` (time to first token), `ttfa` (time to first answer token), `tpot` (time per
  output token after the first, (e2e - ttft) / (output_tokens - 1), vLLM bench's TPOT), `e2e`
  (`e2el`, vLLM's name, is accepted too). Operators `<=` and `<`; units `ms` or `s` (none: s).
- Who is counted (the denominator of the share): every request that was sent outside a warm-up
  and not cancelled by the swarm itself, i.e. ok + failed. A failed request is never good (vLLM
  bench counts failures as not good; AIPerf: a request missing a metric is not good).
- A successful request missing a metric is not good (AIPerf), with one exception: `tpot` of an
  answer of at most one output token is undefined and taken as 0 (vLLM bench sets tpot = 0 there:
  there is no inter-token time to be slow).

`GoodputSpec.met(record)` is the check; swarm/stats/aggregate.py counts it per cell
(`Cell.goodput_met` / `Cell.goodput_counted`, exact integers merged by addition), so the worker
counts it exactly and the master adds the counts up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.records import Outcome, RequestRecord
from swarm.stats.quantiles import rate

METRICS: dict[str, str] = {"ttft": "ttft_s", "ttfa": "ttfa_s", "tpot": "tpot_s", "e2e": "e2e_s"}
ALIASES = {"e2el": "e2e"}
_UNITS = {"ms": 1e-3, "s": 1.0, "": 1.0}
_RE = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s*(?P<op><=|<)\s*"
    r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>ms|s)?\s*$"
)


@dataclass(frozen=True)
class Bound:
    """One per-request objective: `metric op threshold` (seconds)."""

    metric: str  # ttft, ttfa, tpot, e2e
    field: str  # the RequestRecord field read
    threshold_s: float
    strict: bool  # `<` rather than `<=`

    def holds(self, record: RequestRecord) -> bool:
        value = getattr(record, self.field)
        if value is None:
            if self.metric == "tpot" and record.output_tokens <= 1:
                value = 0.0  # vLLM bench: no inter-token time
            else:
                return False
        return value < self.threshold_s if self.strict else value <= self.threshold_s


@dataclass(frozen=True)
class GoodputSpec:
    """The parsed `--goodput`: every bound must hold for a request to be good."""

    text: str  # as the user wrote it (summary.json's `goodput.slo`)
    bounds: tuple[Bound, ...]

    def met(self, record: RequestRecord) -> bool:
        """True when `record` succeeded and every bound holds (warm-up and cancellation are the
        caller's to exclude: see `counted`)."""
        if record.outcome is not Outcome.OK:
            return False
        for b in self.bounds:  # noqa: SIM110 - a loop, not all(<generator>): once per request on workers
            if not b.holds(record):
                return False
        return True

    @staticmethod
    def counted(record: RequestRecord) -> bool:
        """Whether `record` is in the denominator: sent outside a warm-up and not cancelled (by the
        stop or by its client)."""
        return not record.warmup and not (
            record.outcome is Outcome.CANCELLED or record.outcome is Outcome.CANCELLED_BY_CLIENT
        )


def parse_goodput(text: str) -> GoodputSpec:
    """`ttft<=500ms,tpot<=50ms,e2e<=10s` -> GoodputSpec; UsageError naming the bad part."""
    if not text or not text.strip():
        raise UsageError("--goodput is empty: give per-request SLOs, e.g. ttft<=500ms,e2e<=10s")
    bounds: list[Bound] = []
    for part in text.split(","):
        m = _RE.match(part)
        if m is None:
            raise UsageError(
                f"--goodput: cannot read {part.strip()!r}: use METRIC<=VALUE[ms|s] with METRIC in "
                f"{', '.join(METRICS)}, e.g. ttft<=500ms"
            )
        metric = ALIASES.get(m["metric"], m["metric"])
        if metric not in METRICS:
            raise UsageError(f"--goodput: unknown metric {m['metric']!r} (use {', '.join(METRICS)})")
        if any(b.metric == metric for b in bounds):
            raise UsageError(f"--goodput: {metric} is given twice")
        threshold = float(m["num"]) * _UNITS[m["unit"] or ""]
        if not 0 < threshold < float("inf"):  # 1e999 parses as inf: no bound at all
            raise UsageError(f"--goodput: {part.strip()!r}: the bound must be a finite number > 0")
        bounds.append(Bound(metric, METRICS[metric], threshold, m["op"] == "<"))
    return GoodputSpec(text.strip(), tuple(bounds))


def block(
    text: str, met: int, counted: int, duration_s: float | None, rate_met: int | None = None
) -> dict[str, Any]:
    """summary.json's `goodput` entry of one block: {slo, met, rate, share}. `met`: good requests;
    `counted`: ok + failed non-warm-up requests; `rate_met`: good requests that finished inside the
    window (None: `met`), over `duration_s` as qps counts completions."""
    return {
        "slo": text,
        "met": met,
        "rate": rate(met if rate_met is None else rate_met, duration_s),
        "share": met / counted if counted else None,
    }
