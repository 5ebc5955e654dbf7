"""Service-level objectives for headless CI: parse `--slo` and check them against a summary.

Syntax: comma-separated objectives `[WORKLOAD.]METRIC OP VALUE[UNIT]`, e.g.
`ttft_p99<=800ms,e2e_p99<=5s,error_rate<=1%,short_qa.tpot_p50<=40ms,total.qps>=10`.
METRIC is `<latency>_<stat>` with latency in ttft ttfa itl tpot e2e and stat in p50 p90 p95 p99
mean max (seconds; units ms/s), or one of `error_rate` (fraction; unit %), `qps`,
`output_tok_s`, `requests`. WORKLOAD defaults to `total`. OP is one of <= < >= >.
The summary is the `summary.json` dict (see swarm/stats/summary.py).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.records import LATENCIES
from swarm.core.units import percent_text, seconds_text
from swarm.stats import quantiles
from swarm.stats.quantiles import STAT_KEYS

STATS = STAT_KEYS
RATES = ("error_rate", "qps", "output_tok_s", "requests")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}
_UNITS = {"ms": 1e-3, "s": 1.0, "%": 1e-2, "": 1.0}
_RE = re.compile(
    r"^\s*(?:(?P<wl>[A-Za-z0-9_\-]+)\.)?(?P<metric>[a-z0-9_]+)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>ms|s|%)?\s*$"
)
# a percentile with decimals (ttft_p99.9): its dot would otherwise read as WORKLOAD.METRIC
_FINE_PERCENTILE = re.compile(
    r"^\s*(?:[A-Za-z0-9_\-]+\.)?[a-z][a-z0-9_]*_(?P<stat>p[0-9]+\.[0-9]+)\s*(?:<=|>=|<|>)"
)


@dataclass(frozen=True)
class Objective:
    workload: str
    metric: str
    op: str
    threshold: float  # in base units: seconds, fraction, 1/s
    text: str  # as the user wrote it

    def measured(self, summary: Mapping[str, Any]) -> float | None:
        """The summary's value for this objective, or None when the run has no such data."""
        wl = summary.get(self.workload)
        if wl is None:
            return None
        if self.metric == "error_rate":
            failed = sum(wl.get("failures", {}).values())
            cut = wl.get("cancelled", 0) + wl.get("cancelled_by_client", 0)  # neither ok nor failed
            return quantiles.error_rate(wl.get("requests", 0), failed, cut)
        if self.metric in RATES:
            return wl.get(self.metric)
        name, stat = self.metric.rsplit("_", 1)
        return (wl.get(f"{name}_s") or {}).get(stat)


@dataclass(frozen=True)
class Verdict:
    objective: Objective
    value: float | None

    @property
    def ok(self) -> bool:
        return self.value is not None and _OPS[self.objective.op](self.value, self.objective.threshold)

    def describe(self) -> str:
        o = self.objective
        status = "PASS" if self.ok else "FAIL"
        measured = "no data" if self.value is None else _fmt(o.metric, self.value)
        return f"SLO {status}: {o.workload}.{o.metric} {o.op} {_fmt(o.metric, o.threshold)} (measured {measured})"


def _fmt(metric: str, v: float) -> str:
    if metric == "error_rate":
        return percent_text(v, 2)
    if metric in RATES:
        return f"{v:.2f}"
    return seconds_text(v, ms_digits=1, s_digits=3, switch_s=1.0)


def parse(
    text: str, workloads: set[str] | None = None, what: str = "SLO", flag: str = "--slo"
) -> list[Objective]:
    """Parse an `--slo` string (`what`/`flag`: how errors name it; `--abort-on` reuses this grammar).
    Raises UsageError naming the bad part and the expected form."""
    objectives = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if fine := _FINE_PERCENTILE.match(part):
            percentiles = ", ".join(s for s in STATS if s.startswith("p"))
            raise UsageError(
                f"bad {what} {part!r}: percentile {fine['stat']} is not kept (summary.json keeps "
                f"{percentiles}, mean and max)"
            )
        m = _RE.match(part)
        if not m:
            raise UsageError(
                f"bad {what} {part!r}: expected [WORKLOAD.]METRIC OP VALUE[ms|s|%], e.g. ttft_p99<=800ms"
            )
        metric, unit = m["metric"], m["unit"] or ""
        is_latency = (
            "_" in metric and metric.rsplit("_", 1)[0] in LATENCIES and metric.rsplit("_", 1)[1] in STATS
        )
        if not is_latency and metric not in RATES:
            known = ", ".join([f"{lat}_{{{'|'.join(STATS)}}}" for lat in LATENCIES][:1] + list(RATES))
            raise UsageError(
                f"bad {what} {part!r}: unknown metric {metric!r} (known: {known}; latencies "
                f"{'/'.join(LATENCIES)})"
            )
        if (unit == "%" and metric != "error_rate") or (unit in ("ms", "s") and not is_latency):
            raise UsageError(f"bad {what} {part!r}: unit {unit!r} does not fit {metric}")
        objective = Objective(m["wl"] or "total", metric, m["op"], float(m["num"]) * _UNITS[unit], part)
        if workloads is not None:
            check_workloads([objective], workloads, what)
        _check_threshold(part, what, metric, objective.op, objective.threshold)
        objectives.append(objective)
    if not objectives:
        raise UsageError(f"empty {flag}: give at least one objective, e.g. ttft_p99<=800ms")
    return objectives


def check_workloads(objectives: Sequence[Objective], workloads: set[str], what: str = "SLO") -> None:
    """Each objective's WORKLOAD is one of the run's `workloads` (or the total): UsageError naming the
    first that is not. Apart from `parse` for objectives parsed before the run's workloads are known
    (swarm/live/user.py), so --slo is parsed once."""
    for o in objectives:
        if o.workload != "total" and o.workload not in workloads:
            raise UsageError(
                f"bad {what} {o.text!r}: no workload {o.workload!r} in this run ({', '.join(sorted(workloads))})"
            )


def _check_threshold(part: str, what: str, metric: str, op: str, threshold: float) -> None:
    """A threshold no measurement can be compared with meaningfully: not finite (1e999), an error
    rate outside 0-100% (a share of the requests), or `< 0` (every metric is >= 0: never holds)."""
    if not math.isfinite(threshold):
        raise UsageError(f"bad {what} {part!r}: the value must be a finite number")
    if metric == "error_rate" and threshold > 1:
        raise UsageError(
            f"bad {what} {part!r}: an error rate is a share of the requests, 0-100% (or 0-1), "
            f"not {percent_text(threshold, 2)}"
        )
    if op == "<" and threshold == 0:
        raise UsageError(f"bad {what} {part!r}: {metric} is never below 0, so this can never hold")


def value_text(metric: str, v: float) -> str:
    """A measured or threshold value of `metric` as the verdict lines print it."""
    return _fmt(metric, v)


def task_bound(objectives: Sequence[Objective] | None) -> float | None:
    """The bound of the first task SLO (`task_pNN<=T` / `<T`), None without one: agent tasks'
    goodput is the share of tasks within it."""
    for o in objectives or ():
        if o.metric.startswith("task_") and o.op in ("<=", "<"):
            return o.threshold
    return None


def evaluate(objectives: list[Objective], summary: Mapping[str, Any]) -> list[Verdict]:
    return [Verdict(o, o.measured(summary)) for o in objectives]
