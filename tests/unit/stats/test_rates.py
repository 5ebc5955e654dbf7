"""The web UI's current rates: differences of running counts over a sliding window."""

from __future__ import annotations

from swarm.stats.aggregate import Aggregate
from swarm.stats.rates import RateWindow, counts
from tests.helpers.synthetic import synthetic_records


def test_counts_cover_each_workload_class_model_and_the_total():
    agg = Aggregate()
    for r in synthetic_records(100, workloads=("a", "b")):
        agg.add(r)
    c = counts(agg)
    assert c["total"][0] == 100
    assert c["a"][0] + c["b"][0] == 100
    assert {"good:total", "good:a"} <= set(c)
    assert sum(n for k, (n, _) in c.items() if k.startswith("model:")) == 100


def test_rates_span_the_window_and_drop_older_samples():
    w = RateWindow(window_s=10.0)
    assert w.rates() == {}  # one sample is no rate
    w.add(0.0, {"total": (0, 0)})
    assert w.rates() == {}
    w.add(5.0, {"total": (50, 500)})
    assert w.rates() == {"total": (10.0, 100.0)}
    w.add(20.0, {"total": (250, 2500)})  # the sample at 0 is out of the window; 5 spans it
    assert w.rates() == {"total": (200 / 15, 2000 / 15)}


def test_a_new_key_counts_from_zero_and_no_time_apart_is_no_rate():
    w = RateWindow()
    w.add(1.0, {})
    w.add(3.0, {"x": (4, 8)})
    assert w.rates() == {"x": (2.0, 4.0)}
    same = RateWindow()
    same.add(1.0, {"x": (0, 0)})
    same.add(1.0, {"x": (4, 8)})
    assert same.rates() == {}
