"""Which served model each request asks for: `--model NAME` or a weighted split `--model a:3,b:1`.

vLLM serves LoRA adapters as models of their own (`--lora-modules a=PATH`), so a split sends a
share of the traffic to each adapter (or to each model of a multi-model gateway). A plain
`--model NAME` keeps its meaning: every request names NAME. The draw is one `rng.random()` and a
bisect over cumulative weights computed once, so its cost per request does not grow with the split.

A weight is a number after an item's last `:`, and it must be > 0. Text after the colon that is
not a number stays part of the name (Ollama's `llama3:8b`, weight 1); a typo such as `a:x` is then
caught by discovery as a model the target does not serve.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field

from swarm.core.errors import UsageError

_EXAMPLE = "use NAME or NAME:W,NAME:W, e.g. --model base:3,my-lora:1"


@dataclass(frozen=True)
class ModelSplit:
    """Served model names with their weights, in the order given."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    _cum: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _total: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cum, total = [], 0.0
        for w in self.weights:
            total += w
            cum.append(total)
        object.__setattr__(self, "_cum", tuple(cum))
        object.__setattr__(self, "_total", total)

    @property
    def split(self) -> bool:
        """More than one model: traffic is divided."""
        return len(self.names) > 1

    def share(self, name: str) -> float:
        """The share of requests `name` should get (0..1)."""
        return self.weights[self.names.index(name)] / self._total

    def draw(self, rng: random.Random) -> str:
        """One model, drawn with `rng` by weight (no allocation; one float and a bisect)."""
        names = self.names
        if len(names) == 1:
            return names[0]
        return names[bisect.bisect_right(self._cum, rng.random() * self._total)]

    def __str__(self) -> str:
        if not self.split:
            return self.names[0]
        return ",".join(f"{n}:{w:g}" for n, w in zip(self.names, self.weights, strict=True))


def parse_models(spec: str | None) -> ModelSplit | None:
    """`NAME` or `NAME:W,NAME:W` -> ModelSplit; None/"" (no --model) -> None. UsageError on bad input."""
    if spec is None:
        return None
    text = str(spec).strip()
    if not text:
        raise UsageError(f"empty --model; {_EXAMPLE}")
    items = [item.strip() for item in text.split(",")]
    names: list[str] = []
    weights: list[float] = []
    for item in items:
        if not item:
            raise UsageError(f"bad --model {text!r}: an empty item; {_EXAMPLE}")
        name, sep, w = item.rpartition(":")
        try:
            weight = float(w) if sep else 1.0
        except ValueError:  # not a weight: part of the name (Ollama's `llama3:8b`), weight 1
            name, weight = item, 1.0
        else:
            if not sep:
                name = item
        name = name.strip()
        if not name:
            raise UsageError(f"bad --model {text!r}: {item!r} has no model name; {_EXAMPLE}")
        if not math.isfinite(weight) or weight <= 0:
            raise UsageError(
                f"bad --model {text!r}: weight {w.strip()!r} of {name!r} is not a number > 0; {_EXAMPLE}"
            )
        if name in names:
            raise UsageError(f"bad --model {text!r}: {name!r} is listed twice")
        names.append(name)
        weights.append(weight)
    return ModelSplit(tuple(names), tuple(weights))
