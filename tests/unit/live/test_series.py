"""The LLM tab's charts, in-process: the time series (swarm/live/series.py), the /llm/series route and
the charts page set as the web UI's build path (swarm/live/webui install_charts), on a real Locust
WebUI's Flask app (not started). In Chromium: tests/e2e/test_webui_charts.py."""

from __future__ import annotations

import sys

import pytest
from locust.env import Environment
from locust.event import Events
from locust.html import DEFAULT_BUILD_PATH

from swarm.core.records import RequestRecord
from swarm.live.series import TOTAL, WINDOW_S, LiveSeries, stage_markers
from swarm.live.webui import BUNDLE, SERIES_PATH, install_charts
from swarm.stats.aggregate import Aggregate, ReportRead


def _delta(workload: str, ttfts: list[float], klass: str = "direct") -> ReportRead:
    """A worker's report of these requests, as the master reads it."""
    agg = Aggregate()
    for t in ttfts:
        agg.add(RequestRecord(workload, 1.0, ttft_s=t, e2e_s=t + 1.0, output_tokens=4, request_class=klass))
    return Aggregate.read_wire(agg.to_wire())


def test_points_are_percentiles_of_the_window_and_new_keys_start_with_gaps():
    s = LiveSeries()
    s.add(_delta("chat", [0.1] * 50), now=100.0)
    s.sample(101.0, {"total": (5.0, 20.0), "chat": (5.0, 20.0)}, in_flight=3, users=4)
    s.add(_delta("chat", [0.3] * 50), now=105.0)
    s.add(_delta("rag", [0.5] * 10, klass="long"), now=105.0)
    s.add(_delta("rag", [0.5] * 10, klass="short"), now=105.0)
    s.sample(111.0, {"total": (6.0, 24.0)}, in_flight=None, users=4)  # the first delta is out of the window
    d = s.to_json(stage_markers([{"index": 0, "users": 4, "start_wall_s": 99.0}]))
    assert len(d["time"]) == 2 and d["in_flight"] == [3, None] and d["users"] == [4, 4]
    total = d["series"][TOTAL]
    assert total["ttft_p50_ms"][0] == pytest.approx(100.0, rel=0.01)
    assert total["ttft_p50_ms"][1] == pytest.approx(300.0, rel=0.01)  # only the last 10 s
    assert total["qps"] == [5.0, 6.0] and total["output_tok_s"] == [20.0, 24.0]
    assert total["goodput"] == [None, None]  # no --goodput
    assert d["series"]["rag"]["ttft_p50_ms"] == [None, pytest.approx(500.0, rel=0.01)]
    assert set(d["series"]) == {TOTAL, "chat", "rag", "rag / long", "rag / short"}
    assert d["series"]["chat"]["ttft_p50_ms"][1] == pytest.approx(300.0, rel=0.01)
    assert d["markers"] == [] and d["window_s"] == WINDOW_S


def test_a_point_covers_the_reports_of_the_slots_begun_in_the_window():
    s = LiveSeries()
    for i in range(600):  # 200 reports a second for 3 s (swarm/stats/sliding.py: three slots)
        s.add(_delta("chat", [0.1 if i < 400 else 0.4]), now=1000.0 + i / 200)
    s.sample(1010.5, {}, in_flight=0, users=1)  # the slot begun at 1000.0 is out, 1001.0's in
    p50 = s.to_json()["series"][TOTAL]["ttft_p50_ms"][0]
    assert p50 == pytest.approx(100.0, rel=0.01)  # 200 of 0.1 s (1001.0) and 200 of 0.4 s (1002.0)
    s.sample(1012.0, {}, in_flight=0, users=1)  # only 1002.0's: all 0.4 s
    assert s.to_json()["series"][TOTAL]["ttft_p50_ms"][1] == pytest.approx(400.0, rel=0.01)


def test_a_key_without_requests_in_the_window_is_a_gap():
    s = LiveSeries()
    s.add(_delta("chat", [0.2]), now=0.0)
    s.sample(1.0, {}, in_flight=0, users=1)
    s.sample(30.0, {}, in_flight=0, users=1)
    chat = s.to_json()["series"]["chat"]
    assert chat["ttft_p50_ms"][0] is not None and chat["ttft_p50_ms"][1] is None
    assert chat["qps"] == [0.0, 0.0]


def test_stage_markers_label_every_stage_after_the_first():
    got = stage_markers(
        [
            {"index": 0, "users": 4, "start_wall_s": 0.0},
            {"index": 1, "users": 16, "start_wall_s": 1795440000.5},
            {"index": 2, "users": 8, "rate": 2.5, "start_wall_s": 1795440030.0},
        ]
    )
    assert got == [
        {"time": "2026-11-23T13:20:00.500Z", "label": "stage 2: 16 users"},  # index 1: numbered from 1
        {"time": "2026-11-23T13:20:30.000Z", "label": "stage 3: 2.5 req/s"},
    ]


@pytest.fixture
def locust_argv(monkeypatch):
    """Locust's WebUI parses sys.argv for its extra options: give it a locust command line."""
    monkeypatch.setattr(sys, "argv", ["locust"])


def _web_ui(build_path: str | None = None):
    from locust.argument_parser import parse_options
    from locust.web import WebUI

    env = Environment(events=Events(), parsed_options=parse_options(args=[]))
    env.create_local_runner()
    return WebUI(env, "127.0.0.1", 0, delayed_start=True, build_path=build_path)


def test_charts_page_becomes_the_build_path_and_series_are_served(locust_argv):
    ui = _web_ui()
    assert install_charts(ui, lambda: {"time": ["t"], "series": {}})
    assert ui.app.template_folder == str(BUNDLE)
    client = ui.app.test_client()
    page = client.get("/").get_data(as_text=True)
    script = page.split('src="./assets/', 1)[1].split('"', 1)[0]
    assert script.startswith("llm-swarm-") and (BUNDLE / "assets" / script).exists()
    assert client.get(f"/assets/{script}").status_code == 200
    assert client.get("/assets/favicon-light.png").status_code == 200  # Locust's own, as a fallback
    assert client.get(SERIES_PATH).get_json() == {"time": ["t"], "series": {}}
    source, _, _ = ui.app.jinja_loader.get_source(ui.app.jinja_env, "auth.html")  # Locust's login page
    assert "templateArgs" in source or "authArgs" in source


def test_a_build_path_of_the_users_own_wins(tmp_path, locust_argv):
    ui = _web_ui(build_path=str(tmp_path))
    assert not install_charts(ui, dict)
    assert ui.app.template_folder == str(tmp_path)
    assert ui.app.test_client().get(SERIES_PATH).get_json() == {}
    assert str(DEFAULT_BUILD_PATH) != str(tmp_path)
