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
from swarm.core.units import parse_duration

DIST_HELP = "N, MIN-MAX (uniform), MEAN:SD (normal, clipped at 1) or lognormal:MEDIAN:SIGMA"
MAX_TOKENS = 10_000_000
"""The most a token DIST may be centred on or reach: the longest context window served today is
10M tokens (Llama 4 Scout). A prompt longer than any server takes can only fail, and building one
of 10^12 tokens (a typo) would hold a worker for hours and terabytes before the first request."""


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

    def draw_real(self, rng: random.Random) -> float:
        """A real value >= 0 (think times in seconds: `parse_real_dist`)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "normal":
            return max(0.0, rng.gauss(self.a, self.b))
        return self.a * math.exp(rng.gauss(0.0, self.b))

    @property
    def low(self) -> int:
        """The smallest value it can draw."""
        return int(self.a) if self.kind in ("fixed", "uniform") else 1

    def __str__(self) -> str:
        return self.text


def parse_dist(text: str, flag: str, *, real: bool = False, most: int | None = None) -> Dist:
    """`text` in one of the DIST forms; UsageError naming `flag` otherwise. `real`: values are
    durations >= 0 in the one duration syntax (think times: 2, 500ms, 1.5s-4s, lognormal:2s:0.5;
    seconds: `Dist.draw_real`), else whole numbers >= 1.
    `most`: the largest value, mean or median allowed (token counts: MAX_TOKENS)."""
    s = str(text).strip().replace(" ", "")
    extra = " of durations (e.g. 2s, 500ms-3s; a bare number is seconds)" if real else ""
    bad = UsageError(f"bad {flag} {text!r}: give {DIST_HELP}{extra}")
    num = (lambda v: parse_duration(v, flag)) if real else int
    real_num = num if real else float
    least = 0 if real else 1
    try:
        if s.lower().startswith("lognormal:"):
            _, median, sigma = s.split(":")
            d = Dist("lognormal", real_num(median), float(sigma), s)
            ok = d.a >= 1 or (real and d.a > 0)
            ok = ok and d.b >= 0
        elif ":" in s:
            mean, sd = s.split(":")
            d = Dist("normal", real_num(mean), real_num(sd), s)
            ok = d.a >= least and d.b >= 0
        elif "-" in s:
            lo, hi = s.split("-")
            d = Dist("uniform", num(lo), num(hi), s)
            ok = least <= d.a <= d.b
        else:
            d = Dist("fixed", num(s), 0, s)
            ok = d.a >= least
    except (ValueError, UsageError):
        raise bad from None
    if not ok or not all(math.isfinite(v) for v in (d.a, d.b)):
        raise bad
    scale = d.b if d.kind == "uniform" else d.a  # the largest value, the mean or the median
    if most is not None and scale > most:
        why = " (the longest context window served today)" if most == MAX_TOKENS else ""
        raise UsageError(f"bad {flag} {text!r}: at most {most:,}{why}")
    return d
