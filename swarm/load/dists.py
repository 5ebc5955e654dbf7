"""Token-length distributions of `--input-tokens` / `--output-tokens`: parsed once, drawn per prompt.

| DIST                     | meaning                                   |
|--------------------------|-------------------------------------------|
| `N`                      | always N                                  |
| `MIN-MAX`                | uniform whole numbers in [MIN, MAX]       |
| `MEAN:SD`                | normal, rounded, clipped at 1             |
| `lognormal:MEDIAN:SIGMA` | lognormal with that median, rounded, >= 1 |
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from swarm.core.errors import UsageError

DIST_HELP = "N, MIN-MAX (uniform), MEAN:SD (normal, clipped at 1) or lognormal:MEDIAN:SIGMA"


@dataclass(frozen=True)
class Dist:
    kind: str  # "fixed", "uniform", "normal", "lognormal"
    a: float
    b: float = 0.0
    text: str = ""

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "normal":
            return max(1, round(rng.gauss(self.a, self.b)))
        return max(1, round(self.a * math.exp(rng.gauss(0.0, self.b))))

    @property
    def low(self) -> int:
        """The smallest value it can draw."""
        return int(self.a) if self.kind in ("fixed", "uniform") else 1

    def __str__(self) -> str:
        return self.text


def parse_dist(text: str, flag: str) -> Dist:
    """`text` in one of the DIST forms; UsageError naming `flag` otherwise."""
    s = str(text).strip().replace(" ", "")
    bad = UsageError(f"bad {flag} {text!r}: give {DIST_HELP}")
    try:
        if s.lower().startswith("lognormal:"):
            _, median, sigma = s.split(":")
            d = Dist("lognormal", float(median), float(sigma), s)
            ok = d.a >= 1 and d.b >= 0
        elif ":" in s:
            mean, sd = s.split(":")
            d = Dist("normal", float(mean), float(sd), s)
            ok = d.a >= 1 and d.b >= 0
        elif "-" in s:
            lo, hi = s.split("-")
            d = Dist("uniform", int(lo), int(hi), s)
            ok = 1 <= d.a <= d.b
        else:
            d = Dist("fixed", int(s), 0, s)
            ok = d.a >= 1
    except ValueError:
        raise bad from None
    if not ok or not all(math.isfinite(v) for v in (d.a, d.b)):
        raise bad
    return d
