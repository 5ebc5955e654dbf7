"""report.html, tune.html and compare.html in real headless Chromium, offline: a 10,000-request run's report (with
the simulator's trace), a tune's page and a comparison open from file://, every chart draws (its data points read
back from the page's charts and held to the run), no console error, no request that is not file: or
data:, and the report stays under 3 MB."""

from __future__ import annotations

import json

import pytest

from swarm.analysis import compare
from swarm.analysis.report import write_report
from swarm.analysis.rundir import load_run
from swarm.tune.report import write_tune_report
from tests.e2e.test_webui import _driver
from tests.helpers.sweep_run import SHORT_QA, add_sim_trace, make_run
from tests.unit.analysis.test_compare import args as compare_args
from tests.unit.tune.test_report import result as tune_result

pytestmark = pytest.mark.integration

REQUESTS = 10_000
MAX_BYTES = 3_000_000
STAGE_S = REQUESTS / sum(qps for _, qps, _ in SHORT_QA)  # the seed's QPS over six stages: ~10,000 requests


def _open(driver, path) -> list[dict]:
    """Load a page, wait until every chart has drawn (or failed), return window.swarmCharts."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script(
            "return window.swarmCharts && window.swarmCharts.length > 0 && "
            "window.swarmCharts.every(c => c.drawn > 0 || c.error)"
        )
    )
    return driver.execute_script("return window.swarmCharts")


def _inked(driver) -> list[int]:
    """Per chart canvas: how many of its pixels are drawn on (not transparent)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('.uplot canvas')].map(c => {"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
        " for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })"
    )


def _outside_requests(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return [u for u in urls if not u.startswith(("file:", "data:"))]


def _drain(driver) -> None:
    """Forget what the browser logged before (its own new-tab page's chrome:// requests)."""
    driver.get("about:blank")
    driver.get_log("performance")
    driver.get_log("browser")


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_report_tune_and_compare_pages_draw_every_chart_offline(tmp_path):
    run = make_run(tmp_path / "run", stage_s=STAGE_S)
    assert add_sim_trace(run) >= REQUESTS
    page = write_report(run)
    assert page.stat().st_size < MAX_BYTES, page.stat().st_size
    tune_page = write_tune_report(tmp_path / "tune", tune_result())
    other = make_run(tmp_path / "other", table=SHORT_QA[:4])
    assert compare.main(compare_args(str(other), str(run), "--allow-different")) == 0
    data = load_run(run)
    df = data.records

    driver = _driver(tmp_path, logs=True)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]}
        )
        _drain(driver)
        charts = {c["id"]: c for c in _open(driver, page)}
        assert not [c for c in charts.values() if c.get("error")], charts
        assert set(charts) == {
            "chart-qps", "chart-ttft", "chart-e2e", "chart-throughput", "chart-client-server-ttft",
            "chart-requests-per-s", "chart-ttft-per-s", "chart-requests-ttft", "chart-server-queue",
            "chart-server-kv", "chart-request-timeline",
        }  # fmt: skip
        inked = _inked(driver)
        assert len(inked) >= len(charts) and min(inked) > 1000, inked
        driver.save_screenshot(str(tmp_path / "report.png"))

        # each chart's points, read back from the page, held to the run
        qps = charts["chart-qps"]["series"][0]
        assert qps["points"] == len(data.rows)
        assert qps["first"] == [SHORT_QA[0][0], pytest.approx(data.rows[0].qps, rel=1e-3)]
        assert qps["last"] == [SHORT_QA[-1][0], pytest.approx(data.rows[-1].qps, rel=1e-3)]
        every = {s["label"]: s for s in charts["chart-requests-ttft"]["series"]}
        assert every["TTFT ms (ok)"]["points"] == int((df["outcome"] == "ok").sum())
        assert every["failed (at 0)"]["points"] == int((df["outcome"] == "timeout").sum()) > 0
        first = df.sort_values("start_wall_s").iloc[0]
        assert every["TTFT ms (ok)"]["first"][1] == pytest.approx(first["ttft_s"] * 1000, rel=1e-3)
        per_s = {s["label"]: s for s in charts["chart-requests-per-s"]["series"]}
        assert sum_of(driver, "chart-requests-per-s", 1) == len(df)  # sent/s adds up to every request
        assert per_s["sent/s"]["points"] == charts["chart-requests-per-s"]["x"]
        server = {s["label"]: s for s in charts["chart-server-queue"]["series"]}
        assert server["running"]["points"] == len(data.snapshots)
        timeline = charts["chart-request-timeline"]
        busiest = max(data.rows, key=lambda r: r.qps or 0)
        assert timeline["bars"] == min(200, int((df["stage"] == busiest.stage).sum()))
        assert timeline["phases"] == 3 * timeline["bars"]  # queue, prefill, decode each from the trace
        assert f"{busiest.users} users" in timeline["window"]
        # one linked time axis: a zoom on the client's timeline zooms the server's too
        driver.execute_script("window.swarmZoom('chart-requests-per-s', 20, 40)")
        assert driver.execute_script("return window.swarmRange('chart-server-queue')") == [20, 40]
        assert _errors(driver) == []

        tune = _open(driver, tune_page)
        assert [c["id"] for c in tune] == ["chart-pareto"] and not tune[0].get("error")
        pareto = {s["label"]: s["points"] for s in tune[0]["series"]}
        assert pareto == {"max-num-seqs=64": 2, "max-num-seqs=256": 3, "Pareto front": pareto["Pareto front"]}
        assert pareto["Pareto front"] >= 2 and min(_inked(driver)) > 1000
        driver.save_screenshot(str(tmp_path / "tune.png"))
        assert _errors(driver) == []

        side = {c["id"]: c for c in _open(driver, run / "compare.html")}
        qps = {s["label"]: s["points"] for s in side["chart-compare-qps"]["series"]}
        assert qps == {"A sweep-test": 4, "B sweep-test": len(SHORT_QA)} and min(_inked(driver)) > 1000
        assert not [c for c in side.values() if c.get("error")] and _errors(driver) == []
        assert _outside_requests(driver) == []
    finally:
        driver.quit()


def sum_of(driver, chart: str, series: int) -> float:
    """The sum of one series' values as the page's chart holds them."""
    return driver.execute_script(
        "return window.swarmPlot(arguments[0]).data[arguments[1]].reduce((a, v) => a + (v || 0), 0)",
        chart,
        series,
    )
