"""The LLM tab in Locust's web UI, in real headless Chromium: it appears, has per-workload rows,
and its numbers move while a run is going. Also: /metrics on the web UI's port."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time

import pytest

from tests.helpers.support import HELPERS, free_port, start, wait_http

pytestmark = pytest.mark.serial

LOCUSTFILE = str(HELPERS / "plugin_locustfile.py")
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1000",
)


def _driver(tmp_path, logs: bool = False):
    """Headless Chromium; with `logs`, its console and network logs kept (get_log("browser"), get_log("performance"))."""
    selenium = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("chromium/chromedriver missing: run scripts/install-system-deps.sh")
    opts = selenium.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        opts.add_argument(flag)
    if logs:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    return selenium.Chrome(service=service, options=opts)


def _llm_rows(driver) -> dict[str, list[str]]:
    from selenium.webdriver.common.by import By

    out = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, "table tbody tr"):
        cells = [td.text.strip() for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        if cells:
            out[cells[0]] = cells
    return out


@pytest.mark.integration
def test_llm_tab_is_live_in_chromium(tmp_path):
    web_port, master_port = free_port(), free_port()
    env = {"SWARM_TEST_WAIT_S": "0.05"}
    master_cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--master",
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(master_port),
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(web_port),
        "--autostart",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "60s",
        "--expect-workers",
        "1",
        "--run-id",
        "ui-1",
    ]
    worker_cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--worker",
        "--master-host",
        "127.0.0.1",
        "--master-port",
        str(master_port),
    ]
    base = f"http://127.0.0.1:{web_port}"
    with contextlib.ExitStack() as stack:
        master = stack.enter_context(start(master_cmd, tmp_path / "master.log", env=env))
        stack.enter_context(start(worker_cmd, tmp_path / "worker.log", env=env))
        wait_http(base + "/", timeout=60, proc=master.popen, log=master.log)

        import urllib.request

        deadline = time.monotonic() + 60
        metrics = ""
        while time.monotonic() < deadline and "swarm_e2e_seconds_count{" not in metrics:
            with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
                metrics = r.read().decode()
            time.sleep(0.5)
        assert 'run_id="ui-1"' in metrics
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=metrics, capture_output=True, text=True)
            assert p.returncode == 0, p.stdout + p.stderr

        driver = _driver(tmp_path)
        stack.callback(driver.quit)
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        driver.get(base + "/")
        wait = WebDriverWait(driver, 30)
        tab = wait.until(
            ec.element_to_be_clickable((By.XPATH, "//button[@role='tab'][normalize-space()='LLM']"))
        )
        tab.click()
        wait.until(lambda d: {"chat", "short_qa", "Total"} <= set(_llm_rows(d)))
        headers = [th.text.strip() for th in driver.find_elements(By.CSS_SELECTOR, "table thead th")]
        for title in (
            "Workload",
            "QPS",
            "Output tok/s",
            "TTFT p50 (ms)",
            "TTFT p99 (ms)",
            "TTFA p50 (ms)",
            "TPOT p50 (ms)",
            "ITL p99 (ms)",
            "E2E p99 (ms)",
            "Errors by outcome",
        ):
            assert title in headers, headers
        first = _llm_rows(driver)
        assert int(first["Total"][1]) > 0
        wait.until(lambda d: int(_llm_rows(d)["Total"][1]) > int(first["Total"][1]) + 10)
        second = _llm_rows(driver)
        assert second["Total"] != first["Total"]
        assert second["chat"][1] != first["chat"][1] or second["short_qa"][1] != first["short_qa"][1]
        qps_col = headers.index("QPS")
        assert float(second["Total"][qps_col]) > 0
        assert "sk-test-secret-key" not in driver.page_source
        driver.save_screenshot(str(tmp_path / "llm-tab.png"))
