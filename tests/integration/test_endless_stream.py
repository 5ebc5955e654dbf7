"""Issue 25 item 5: a stream that never ends holds bounded memory until --request-deadline.

A real Locust process (swarm's LLMUser, one user) against tests/helpers/fault_servers.py's
`endless` server, which streams one-token chunks as fast as the client reads them. Before the cap
the record's `itl_s` held every gap (1.89 M floats in 45 s) and the worker's RSS grew ~3 MB/s;
and a stream faster than the client never let the event loop run, so the deadline never fired.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarm.client.tally import ITL_KEEP
from tests.helpers.fault_servers import fault_server
from tests.helpers.support import HELPERS, REPO

pytestmark = pytest.mark.serial

DEADLINE_S = 15.0
SETTLED_S = 5.0  # RSS after start-up and the first seconds of the stream: the baseline
GROWTH_MAX_MB = 15.0  # measured: +0 MB over 60 s with the cap; +13 MB a second without it


def vm_rss(pid: int) -> int | None:
    """The process's resident set in bytes (/proc/PID/status VmRSS), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@pytest.mark.integration
def test_endless_stream_keeps_itl_capped_and_memory_bounded(tmp_path):
    records = tmp_path / "records.jsonl"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWARM_TEST_RECORDS": str(records)}
    env.pop("OPENAI_API_KEY", None)
    with fault_server(tmp_path, "endless") as (url, _):
        cmd = [
            sys.executable, "-m", "locust", "-f", str(HELPERS / "locust_records.py"), "--headless",
            "-u", "1", "-r", "1", "-t", f"{DEADLINE_S + 30:g}s", "--host", url,
            "--request-deadline", f"{DEADLINE_S:g}", "--request-timeout", "10",
        ]  # fmt: skip
        log = tmp_path / "locust.log"
        with open(log, "wb") as out:
            p = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env, start_new_session=True
            )
        try:
            t0 = time.monotonic()
            samples: list[tuple[float, int]] = []
            # until the first request's record (its deadline), then a little more
            while p.poll() is None and time.monotonic() - t0 < DEADLINE_S + 40:
                rss = vm_rss(p.pid)
                if rss is not None:
                    samples.append((time.monotonic() - t0, rss))
                if records.exists() and records.stat().st_size > 0:
                    break
                time.sleep(0.1)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    output = log.read_text(errors="replace")
    assert records.exists(), output[-3000:]
    first = json.loads(records.read_text().splitlines()[0])
    assert first["outcome"] == "timeout" and first["tokens_from_usage"], (first["outcome"], first["error"])
    # the deadline fires though the socket never runs dry (the transport gives the loop a turn)
    assert DEADLINE_S <= first["e2e_s"] < DEADLINE_S + 5, first["e2e_s"]
    # (a) the record keeps the first ITL_KEEP gaps and counts the rest: kept + dropped = chunks - 1
    chunks = first["output_tokens"]  # one token a chunk, counted by the server's running usage
    assert chunks > 2 * ITL_KEEP, chunks  # the stream ran far past the cap
    assert len(first["itl_s"]) == ITL_KEEP
    assert first["itl_dropped"] == chunks - 1 - ITL_KEEP
    assert 0 < first["itl_dropped_max_s"] <= first["itl_dropped_sum_s"] < first["e2e_s"]
    kept_and_dropped = sum(first["itl_s"]) + first["itl_dropped_sum_s"]
    assert kept_and_dropped <= first["e2e_s"] - first["ttft_s"] + 1e-6
    # (b) the Locust process's RSS from SETTLED_S into the stream to its deadline
    base = next(rss for t, rss in samples if t >= SETTLED_S)
    peak = max(rss for t, rss in samples if t >= SETTLED_S)
    grown = (peak - base) / 2**20
    print(
        f"\nendless stream: {chunks} chunks in {first['e2e_s']:.1f} s, RSS {base / 2**20:.0f} MB at "
        f"{SETTLED_S:g} s, peak {peak / 2**20:.0f} MB ({grown:+.1f} MB)"
    )
    assert grown < GROWTH_MAX_MB, grown
