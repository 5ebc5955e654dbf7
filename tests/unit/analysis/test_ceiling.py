"""The ceiling on the seed's sweeps: short QA plateaus between 200 and 256 users, chat not yet."""

from __future__ import annotations

from swarm.analysis.ceiling import saturation
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis.helpers import CHAT, rows


def test_short_qa_plateau_between_200_and_256():
    f = saturation(rows(SHORT_QA))
    assert f.kind == "saturation" and f.stage == 4  # the 200-user stage is the ceiling
    assert "200 users" in f.text and "256 users" in f.text and "64.9 -> 64.7" in f.text
    assert "727 ms -> 843 ms" in f.text


def test_chat_has_no_ceiling_yet():
    f = saturation(rows(CHAT))
    assert f.kind == "no_saturation" and "+10.7%" in f.text
    assert saturation(rows(CHAT[:1])) is None  # one stage: nothing to compare
