"""The LLM tab's live charts in real headless Chromium: a Locust runner with the swarm's own
locustfile (LLMUser, the sweep shape) against `swarm sim`, the web UI on the swarm's charts page
(swarm/live/webui/bundle, Locust's locust-ui library). The charts draw, move as points arrive,
carry the stage change as a marker, and /llm/series holds what they plot."""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.request

import pytest

from swarm.live.webui import BUNDLE, SERIES_PATH
from tests.e2e.test_webui import _driver
from tests.helpers.support import REPO, free_port, sim_server, start, wait_http

pytestmark = [pytest.mark.serial, pytest.mark.integration]

STAGE_S = 20  # two sweep stages, the second one's start the marker; long enough that a busy machine still
# sees points arrive (sampling stops with the run) before the browser is up and the tab open
CHARTS = 6  # TTFT, TPOT/ITL, E2E, tok/s + req/s, goodput, in flight


def _series(base: str) -> dict:
    with urllib.request.urlopen(base + SERIES_PATH, timeout=10) as r:
        return json.loads(r.read())


def _canvases(driver) -> list[str]:
    """Each chart's pixels (a data URL per canvas), in page order."""
    return driver.execute_script(
        "return [...document.querySelectorAll('[data-testid=llm-charts] canvas')].map(c => c.toDataURL())"
    )


def test_llm_charts_render_and_move(tmp_path):
    assert (BUNDLE / "index.html").exists(), "the charts page is not built: make webui"
    web_port = free_port()
    with contextlib.ExitStack() as stack:
        sim = stack.enter_context(sim_server(tmp_path, trace=False))
        locust_cmd = [
            sys.executable, "-m", "locust", "-f", str(REPO / "swarm/locustfile.py"), "--host", sim.url,
            "--web-host", "127.0.0.1", "--web-port", str(web_port), "--autostart",
            "--sweep", "2,4", "--stage-time", f"{STAGE_S}s", "--workload", "short_qa:1,chat:1",
            "--max-tokens", "24", "--run-id", "charts-1",
        ]  # fmt: skip
        runner = stack.enter_context(start(locust_cmd, tmp_path / "locust.log"))
        base = f"http://127.0.0.1:{web_port}"
        wait_http(base + "/", timeout=60, proc=runner.popen, log=runner.log)

        driver = _driver(tmp_path)
        stack.callback(driver.quit)
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        driver.get(base + "/")
        wait = WebDriverWait(driver, 60)
        wait.until(
            ec.element_to_be_clickable((By.XPATH, "//button[@role='tab'][normalize-space()='LLM']"))
        ).click()
        charts = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=llm-charts]")))
        wait.until(lambda d: len(_canvases(d)) >= CHARTS)

        # the series fill: Total percentiles and rates, per workload, requests in flight
        wait.until(
            lambda _: (
                sum(v is not None for v in _series(base)["series"].get("Total", {}).get("ttft_p50_ms", []))
                >= 2
            )
        )
        first = _canvases(driver)
        # the charts move as points arrive: every chart's pixels change (waited for, not timed)
        wait.until(lambda d: sum(a != b for a, b in zip(first, _canvases(d), strict=True)) >= CHARTS)

        # the second stage's start is a marker, on the page and in the data
        WebDriverWait(driver, STAGE_S + 30).until(lambda d: "1 stage changes marked" in charts.text)
        # the marker comes from the stage timeline at once, the users from the next 2 s sample
        wait.until(lambda _: max(_series(base)["users"] or [0]) == 4)
        data = _series(base)
        assert [m["label"] for m in data["markers"]] == ["stage 2: 4 users"]  # index 1
        total = data["series"]["Total"]
        assert max(v for v in total["qps"] if v is not None) > 0
        assert max(v for v in total["output_tok_s"] if v is not None) > 0
        assert {"short_qa", "chat"} <= set(data["series"])
        assert max(n for n in data["in_flight"] if n is not None) >= 1
        assert max(data["users"]) == 4
        # one workload's charts instead of the total's
        before = _canvases(driver)
        charts.find_element(By.CSS_SELECTOR, "[role=combobox]").click()
        wait.until(
            ec.element_to_be_clickable((By.XPATH, "//li[@role='option'][normalize-space()='chat']"))
        ).click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "[role=combobox]").text == "chat")
        wait.until(lambda d: sum(a != b for a, b in zip(before, _canvases(d), strict=True)) >= CHARTS - 1)
        # the LLM table is still there, under the charts
        rows = [
            tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "[data-testid=llm-charts] table tbody tr")
        ]
        assert any(r.startswith("Total") for r in rows), rows
        driver.save_screenshot(str(tmp_path / "llm-charts.png"))
