"""The README's screenshot of the LLM tab (docs/llm-tab.png), re-made by anyone:

    .venv/bin/python scripts/webui_screenshot.py [--out docs/llm-tab.png] [--stage-time 20]

Starts `swarm sim` (the calibrated rtx5090x4-qwen3.6-27b profile) and a Locust runner with the swarm's locustfile
(a 4,16,32-user sweep, short_qa:3,chat:1), opens the web UI's LLM tab in headless Chromium
(Debian's chromium + chromedriver, selenium), waits for the third stage, saves a PNG and stops
everything it started. Traffic goes to loopback only.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"webui_screenshot: {url} did not answer in {timeout_s:.0f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(REPO / "docs/llm-tab.png"))
    p.add_argument("--stage-time", type=int, default=20, help="seconds per sweep stage (default 20)")
    a = p.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    sim_port, web_port = free_port(), free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "swarm", "sim", "--host", "127.0.0.1", "--port", str(sim_port),
             "--profile", "rtx5090x4-qwen3.6-27b"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
        wait_http(f"http://127.0.0.1:{sim_port}/health")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(REPO / "swarm/locustfile.py"),
             "--host", f"http://127.0.0.1:{sim_port}", "--web-host", "127.0.0.1", "--web-port", str(web_port),
             "--autostart", "--sweep", "4,16,32", "--stage-time", f"{a.stage_time}s",
             "--workload", "short_qa:3,chat:1", "--max-tokens", "64"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
        base = f"http://127.0.0.1:{web_port}"
        wait_http(base + "/")
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for flag in (
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1600,1250",
            "--hide-scrollbars",
        ):
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            driver.get(base + "/")
            wait = WebDriverWait(driver, 60)
            tab = (By.XPATH, "//button[@role='tab'][normalize-space()='LLM']")
            wait.until(ec.element_to_be_clickable(tab)).click()
            time.sleep(2.5 * a.stage_time)  # into the third stage
            driver.save_screenshot(a.out)
        finally:
            driver.quit()
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(f"webui_screenshot: wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
