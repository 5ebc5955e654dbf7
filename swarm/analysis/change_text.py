"""How `swarm compare` writes a change: `+12% [+8%, +16%] *`, the runs' letters, and the note on
how many marks chance alone would give (shared by the run and the --repeat comparisons)."""

from __future__ import annotations

from collections.abc import Iterable

from swarm.stats.confidence import LEVEL
from swarm.stats.difference import Change, expected_false_marks

DOCS = "docs/search-and-slos.md"  # where the method is stated


def _pct(v: float) -> str:
    return f"{v * 100:+.1f}%" if abs(v) < 0.1 else f"{v * 100:+.0f}%"


def change_text(c: Change | None) -> str:
    """The relative change, its 95% interval and `*` when significant; the change alone without an
    interval; "-" without a change."""
    if c is None or c.relative is None:
        return "-"
    if c.rel_low is None or c.rel_high is None:
        return _pct(c.relative)
    return f"{_pct(c.relative)} [{_pct(c.rel_low)}, {_pct(c.rel_high)}]{' *' if c.significant else ''}"


def letter(i: int) -> str:
    """The i-th run's letter (A the baseline)."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def note(changes: Iterable[Change | None]) -> str:
    """The multiple-comparison note: marks made, and how many chance alone would give."""
    judged = [c for c in changes if c is not None and c.significant is not None]
    marked = sum(1 for c in judged if c.significant)
    return (
        f"*: the change's 95% interval excludes 0 (MOVER over both runs' intervals, {DOCS}). "
        f"{marked} of {len(judged)} judged changes marked; were nothing changed, about "
        f"{expected_false_marks(len(judged)):.1f} would be marked by chance ({100 * (1 - LEVEL):.0f}% each)."
    )
