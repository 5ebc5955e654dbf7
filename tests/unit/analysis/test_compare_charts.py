"""swarm/analysis/compare_charts.py: compare.html's charts, run A against run B per figure, from the
comparison's own table (its units as the table shows them; a figure neither run has, left out)."""

from __future__ import annotations

import pandas as pd

from swarm.analysis.compare_charts import compare_charts

METRICS = (
    ("qps", "QPS", "", True),
    ("ttft_p99", "TTFT p99", "ms", False),
    ("srv_kv_max", "KV max", "%", False),
)


def test_a_chart_per_figure_either_run_has_sorted_by_load():
    table = pd.DataFrame(
        {
            "users": [64, 10],
            "qps_a": [40.0, 13.0], "qps_b": [45.0, float("nan")],
            "ttft_p99_a": [0.3, 0.1], "ttft_p99_b": [0.25, 0.12],
            "srv_kv_max_a": [None, None], "srv_kv_max_b": [None, None],
        }
    )  # fmt: skip
    charts = {c.id: c for c in compare_charts(table, "a1", "b1", METRICS)}
    assert list(charts) == ["chart-compare-qps", "chart-compare-ttft_p99"]  # no KV in either run
    qps = charts["chart-compare-qps"]
    assert qps.x == [10.0, 64.0] and qps.x_at_data and qps.x_label == "users"
    assert [(s.label, list(s.values)) for s in qps.series] == [("A a1", [13.0, 40.0]), ("B b1", [None, 45.0])]
    assert list(charts["chart-compare-ttft_p99"].series[1].values) == [120.0, 250.0]  # seconds shown in ms
    assert "lower is better" in charts["chart-compare-ttft_p99"].caption
    assert (
        compare_charts(
            pd.DataFrame({"users": [1, 1], "qps_a": [1, 2], "qps_b": [1, 2]}), "a", "b", METRICS[:1]
        )
        == []
    )
