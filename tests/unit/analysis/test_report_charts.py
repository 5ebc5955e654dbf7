"""swarm/analysis/report_charts.py: report.html's charts from a synthetic sweep run: the stages'
figures at the stages' own loads, the client's per-second timeline adding up to its records, the
server's scrapes, every request's TTFT (thinned past a cap, said), and the per-request timeline from
the simulator's trace or, without one, from the client's records."""

from __future__ import annotations

import pytest

from swarm.analysis import report_charts
from swarm.analysis.interactive import Chart, Timeline
from swarm.analysis.plots import run_start
from swarm.analysis.report_charts import TIME
from swarm.analysis.report_charts import report_charts as charts_of
from swarm.analysis.rundir import load_run
from tests.helpers.sweep_run import SHORT_QA, add_sim_trace, make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("run") / "run")


def _by_id(charts) -> dict:
    return {c.id: c for c in charts}


def test_the_stages_figures_sit_at_the_stages_loads(run):
    data = load_run(run)
    charts = _by_id(charts_of(data, []))
    qps = charts["chart-qps"]
    assert isinstance(qps, Chart) and qps.x == [u for u, _, _ in SHORT_QA] and qps.x_at_data
    assert qps.series[0].values == [r.qps for r in data.rows] and qps.marks == []
    ttft = charts["chart-ttft"].series
    assert ttft[1].values == [r.ttft_p99 * 1000 for r in data.rows]
    pair = charts["chart-client-server-ttft"]
    assert pair.band == (4, 5) and all(
        lo < hi for lo, hi in zip(*(s.values for s in pair.series[4:]), strict=True)
    )
    found = [type("F", (), {"kind": "saturation", "stage": 4})()]
    assert [m.label for m in _by_id(charts_of(data, found))["chart-qps"].marks] == ["ceiling"]


def test_the_timelines_share_one_time_axis_and_add_up_to_the_records(run):
    data = load_run(run)
    charts = _by_id(charts_of(data, []))
    t0 = run_start(data)
    timed = [c for c in charts.values() if c.sync == TIME]
    assert {c.id for c in timed} == {
        "chart-requests-per-s", "chart-ttft-per-s", "chart-requests-ttft", "chart-server-queue",
        "chart-server-kv", "chart-request-timeline",
    }  # fmt: skip
    assert all([m.x for m in c.marks] == [r.start_s - t0 for r in data.rows] for c in timed)
    per_s = {s.label: s.values for s in charts["chart-requests-per-s"].series}
    df = data.records
    assert sum(per_s["sent/s"]) == len(df)
    assert sum(per_s["finished ok/s"]) == (df["outcome"] == "ok").sum()
    assert sum(per_s["failed/s"]) == (df["outcome"] == "timeout").sum() > 0
    assert per_s["in flight (end of second)"][-1] == 0 and max(per_s["in flight (end of second)"]) > 0
    every = charts["chart-requests-ttft"]
    assert len(every.x) == len(df) and every.x == sorted(every.x) and "Every" not in every.caption
    server = charts["chart-server-queue"]
    assert len(server.x) == len(data.snapshots) and server.x[0] == min(s.ts for s in data.snapshots) - t0


def test_every_requests_ttft_is_thinned_past_the_cap_and_says_so(run, monkeypatch):
    data = load_run(run)
    monkeypatch.setattr(report_charts, "MAX_POINTS", 1000)
    every = _by_id(charts_of(data, []))["chart-requests-ttft"]
    step = -(-len(data.records) // 1000)
    assert len(every.x) == -(-len(data.records) // step) <= 1000
    assert f"Every {step}th request of {len(data.records)} is drawn." in every.caption


def test_the_request_timeline_from_the_client_then_from_the_simulators_trace(tmp_path):
    run = make_run(tmp_path / "run")
    data = load_run(run)
    client = _by_id(charts_of(data, []))["chart-request-timeline"]
    assert isinstance(client, Timeline) and client.phases == ["to first token (client)", "streaming (client)"]
    busiest = max(range(len(data.rows)), key=lambda i: data.rows[i].qps)
    assert client.selected == busiest and "200 users" in client.windows[busiest].label
    assert [len(w.bars) for w in client.windows] == [
        min(200, n) for n in data.records["stage"].value_counts().sort_index()
    ]
    first = client.windows[0].bars[0]
    t0 = run_start(data)
    row = data.records.sort_values("start_wall_s").iloc[0]
    assert first.start == pytest.approx(row["start_wall_s"] - t0)
    assert first.bounds == pytest.approx(
        [first.start, first.start + row["ttft_s"], first.start + row["e2e_s"]], abs=1e-6
    )

    add_sim_trace(run, queue_share=0.25)
    traced = _by_id(charts_of(load_run(run), []))["chart-request-timeline"]
    assert traced.phases == ["queue", "prefill", "decode"] and "sim-trace.jsonl" in traced.caption
    bar = traced.windows[0].bars[0]
    assert bar.id == "r0" and bar.bounds == pytest.approx(
        [
            first.start,
            first.start + 0.25 * row["ttft_s"],
            first.start + row["ttft_s"],
            first.start + row["e2e_s"],
        ],
        abs=1e-6,  # (wall-clock seconds near 1.8e9 hold a float's precision to ~1e-7)
    )


def test_a_long_search_keeps_fewer_requests_per_window(tmp_path, monkeypatch):
    monkeypatch.setattr(report_charts, "MAX_WINDOW_BARS", 120)
    timeline = _by_id(charts_of(load_run(make_run(tmp_path / "run")), []))["chart-request-timeline"]
    assert [len(w.bars) for w in timeline.windows] == [20] * len(SHORT_QA)  # 120 / 6 stages
