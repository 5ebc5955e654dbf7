"""The diagnosis' vocabulary: a stage row's label and the way findings write numbers."""

from __future__ import annotations

from swarm.analysis.finding import Finding, StageRow, prose_number, prose_seconds


def test_a_row_is_labelled_by_its_users_else_its_stage_number():
    assert StageRow(stage=2, users=64).label == "64 users"
    assert StageRow(stage=0).label == "stage 1"


def test_numbers_in_prose():
    assert prose_seconds(0.085) == "85 ms" and prose_seconds(12.3) == "12.3 s"
    assert prose_number(64.94) == "64.9" and prose_number(None) == "-"


def test_a_finding_is_trusted_unless_said():
    assert Finding("saturation", 4, "Ceiling at 200 users.").trusted
    assert not Finding("client_bound", 5, "...", trusted=False).trusted
