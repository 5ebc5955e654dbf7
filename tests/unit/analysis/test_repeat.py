"""`swarm run --repeat N`: per stage, the mean of the runs' values and its 95% Student t interval."""

from __future__ import annotations

import dataclasses
import re

import pytest

from swarm.analysis.repeat import across_runs, render
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.confidence import t975
from swarm.stats.goodput import parse_goodput
from tests.helpers.synthetic import synthetic_records


def _summary(seed: int, duration: float) -> dict:
    spec = parse_goodput("e2e<=3s")
    agg = Aggregate(spec)
    for r in synthetic_records(400, seed=seed, workloads=("chat",), stages=(0, 1)):
        agg.add(dataclasses.replace(r, warmup=False))
    return summary.build(agg, run_id=f"r{seed}", start_s=1e9, end_s=1e9 + duration, goodput_slo=spec.text)


def test_mean_and_interval_across_runs():
    runs = [_summary(seed, duration) for seed, duration in ((1, 40.0), (2, 50.0), (3, 45.0))]
    result = across_runs(runs)
    assert result["runs"] == 3 and set(result["stages"]) == {"0", "1", "run"}
    qps = result["stages"]["run"]["qps"]
    values = [s["total"]["qps"] for s in runs]
    assert qps["values"] == values and qps["mean"] == pytest.approx(sum(values) / 3)
    sd = (sum((v - qps["mean"]) ** 2 for v in values) / 2) ** 0.5
    assert qps["ci"][1] - qps["mean"] == pytest.approx(t975(2) * sd / 3**0.5)
    p99 = result["stages"]["1"]["ttft_p99"]
    assert p99["values"] == [s["stages"][1]["total"]["ttft_s"]["p99"] for s in runs]
    assert result["stages"]["run"]["goodput"]["values"] == [s["total"]["goodput"]["rate"] for s in runs]
    text = render(result)
    assert text.startswith("across 3 runs") and " ± " in text and "good/s" in text
    # stages as every label numbers them (repeat.json keeps the 0-based index as its key)
    assert [ln.split()[:2] for ln in text.splitlines()[3:5]] == [["stage", "1"], ["stage", "2"]]
    single = across_runs(runs[:1])["stages"]["run"]["qps"]
    assert single["ci"] is None and single["mean"] == values[0]


def test_compare_two_repeat_results():
    from swarm.analysis.repeat import compare_text

    def result(values):
        return across_runs([{"stages": [], "total": {"qps": v}} for v in values])

    same = compare_text([result([10.0, 11.0, 12.0]), result([10.5, 11.5, 12.5])], ["a", "b"])
    assert re.search(r"QPS +11\.00 +11\.50 +\+4\.5% \[-\d+%, \+\d+%\]$", same, re.M), same
    apart = compare_text([result([10.0, 10.2, 10.1]), result([20.0, 20.2, 20.1])], ["a", "b"])
    assert re.search(r"\+99% \[\+\d+%, \+\d+%\] \*$", apart, re.M) and "1 of 1 judged" in apart
