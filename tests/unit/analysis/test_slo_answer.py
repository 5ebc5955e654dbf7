"""The highest concurrency meeting the SLO, and what the next load broke."""

from __future__ import annotations

from swarm.analysis.slo_answer import slo_max_concurrency
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis.helpers import rows


def test_slo_max_concurrency():
    r = rows(SHORT_QA)
    f = slo_max_concurrency(r, "ttft_p99<=800ms")
    assert f.stage == 4 and "200 users" in f.text and "256 users" in f.text and "FAIL" in f.text
    f = slo_max_concurrency(r, "ttft_p99<=100ms")
    assert f.stage is None and "No stage meets" in f.text
