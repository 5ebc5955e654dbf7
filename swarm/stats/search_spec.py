"""What `swarm run --search` asks for: `SearchSpec.parse` validates `--search
concurrency|rate|knee`, the criterion (`--slo` objectives or `--goodput-min`),
`--search-precision` (default 5%) and `--search-budget` (default 10m).

The search itself: swarm/stats/search_bracket.py; the master's shape that runs it: swarm/live/search.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from swarm.core.errors import UsageError
from swarm.core.options import BY_DEST
from swarm.core.units import parse_share, parse_timespan
from swarm.stats import slo

MODES = ("concurrency", "rate", "knee")
Mode = Literal["concurrency", "rate", "knee"]
DEFAULT_BUDGET = BY_DEST["search_budget"].default  # the option table's ("10m")
FIRST_USERS = 16.0  # --search concurrency/knee without -u: the first load probed
FIRST_RATE = 1.0  # --search rate without --rate: the first rate probed (req/s)


DEFAULT_PRECISION = parse_share(BY_DEST["search_precision"].default, "--search-precision")  # the table's


@dataclass(frozen=True)
class SearchSpec:
    """What `--search` asks for, validated."""

    mode: Mode
    slo_text: str | None = None
    goodput_min: float | None = None  # share of requests meeting --goodput, 0..1
    precision: float = DEFAULT_PRECISION
    budget_s: float = 600.0
    start: float = 16.0  # first load probed: users (concurrency, knee) or requests/s (rate)
    criteria: tuple[slo.Objective, ...] = ()  # --slo, parsed (once: `objectives`)

    @classmethod
    def parse(
        cls,
        mode: str,
        slo_text: str | None,
        goodput_min: str | None,
        precision: str | None,
        budget: str | None,
        start: float,
        goodput_text: str | None = None,
    ) -> SearchSpec:
        if mode not in MODES:
            raise UsageError(f"bad --search {mode!r}: one of {', '.join(MODES)}")
        share = parse_share(goodput_min, "--goodput-min") if goodput_min else None
        if mode == "knee":
            if slo_text or share is not None:
                raise UsageError(
                    "--search knee takes no --slo or --goodput-min: it finds where QPS stops growing"
                )
        elif not slo_text and share is None:
            raise UsageError(
                f'--search {mode} needs a criterion: --slo "ttft_p99<=800ms" or --goodput-min 95%'
            )
        if share is not None and not goodput_text:
            raise UsageError("--goodput-min needs --goodput (the per-request objectives it counts)")
        criteria = tuple(slo.parse(slo_text)) if slo_text else ()
        p = parse_share(precision, "--search-precision") if precision else DEFAULT_PRECISION
        if p >= 0.5:
            raise UsageError(f"bad --search-precision {precision!r}: below 50%, e.g. 5%")
        budget_s = float(parse_timespan(budget or DEFAULT_BUDGET, "--search-budget"))
        if budget_s <= 0:
            raise UsageError("--search-budget must be > 0, e.g. 10m")
        if not start > 0:
            raise UsageError("the search's start load must be > 0")
        return cls(mode, slo_text or None, share, p, budget_s, float(start), criteria)  # type: ignore[arg-type]

    @property
    def unit(self) -> str:
        return "req/s" if self.mode == "rate" else "users"

    def objectives(self) -> list[slo.Objective]:
        return list(self.criteria)
