"""swarm/analysis/change_text.py: how compare writes a change, the runs' letters, the chance note."""

from __future__ import annotations

from swarm.analysis.change_text import change_text, letter, note
from swarm.stats.difference import Change


def _c(rel, low=None, high=None, sig=None) -> Change:
    return Change(0.0, None, None, rel, low, high, sig)


def test_a_change_with_its_interval_and_mark():
    assert change_text(_c(0.13, 0.088, 0.18, True)) == "+13% [+8.8%, +18%] *"
    assert change_text(_c(0.0, -0.036, 0.038, False)) == "+0.0% [-3.6%, +3.8%]"
    assert change_text(_c(-0.91)) == "-91%"  # no interval: the change alone, never a mark
    assert change_text(None) == "-" and change_text(_c(None)) == "-"


def test_letters_and_the_chance_note():
    assert [letter(i) for i in (0, 1, 25, 26)] == ["A", "B", "Z", "R27"]
    said = note([_c(0.1, 0.05, 0.2, True), _c(0.0, -0.1, 0.1, False), _c(0.3), None])
    assert "1 of 2 judged changes marked" in said and "about 0.1 would be marked by chance (5% each)" in said
