"""The whole diagnosis on hand-built stage tables (REFERENCE.md §1): what it says without server metrics."""

from __future__ import annotations

from swarm.analysis.diagnosis import diagnose
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis.helpers import rows


def test_no_server_metrics_is_said():
    kinds = [f.kind for f in diagnose(rows(SHORT_QA), {})]
    assert "no_server_metrics" in kinds and "saturation" in kinds
