"""A worker's CPU over the bar flags its stage untrusted: from its CPU samples, else its own reports."""

from __future__ import annotations

from swarm.analysis.ceiling import saturation
from swarm.analysis.client_bound import client_bound
from swarm.analysis.diagnosis import diagnose
from swarm.stats.cpu import ClientLoad
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis.helpers import rows


def test_client_cpu_over_90_flags_the_stage_untrusted():
    r = rows(SHORT_QA)
    cpu = ClientLoad.from_lines(
        {
            "ts": 1030.0 + 30 * s,
            "worker": w,
            "stage": s,
            "cpu_s": 29.7 if (w, s) == ("worker-1", 5) else 12.0,
            "wall_s": 30.0,
        }
        for s in range(6)
        for w in ("worker-0", "worker-1")
    )  # worker-1 at 99% in stage 5, the rest at 40%
    found = client_bound(r, cpu)
    assert [f.stage for f in found] == [5] and not found[0].trusted
    assert "worker-1" in found[0].text and "not trusted" in found[0].text
    sat = saturation(r, {5})
    assert not sat.trusted and "CPU-bound" in sat.text


def test_without_cpu_samples_the_workers_own_reports_flag_the_stage():
    r = rows(SHORT_QA)
    reported = [{"stage": 5, "worker": "worker-1", "cpu_percent": 97.3}]
    found = [f for f in diagnose(r, bound_reported=reported) if f.kind == "client_bound"]
    assert [(f.stage, f.trusted) for f in found] == [
        (5, False)
    ] and "97% of a core (its own reports)" in found[0].text
    sat = [f for f in diagnose(r, bound_reported=reported) if f.kind == "saturation"]
    assert sat and not sat[0].trusted
    # samples, where there are some, decide: here nobody is busy
    calm = ClientLoad()
    for s in range(6):
        calm.add("worker-1", [[s, 12.0, 30.0]])  # [[stage, cpu_s, wall_s]]: 40%
    assert not [f for f in diagnose(r, cpu=calm, bound_reported=reported) if f.kind == "client_bound"]
