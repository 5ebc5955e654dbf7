"""Real Locust, headless, as a process, with the record-writing locustfile (locust_records.py):
shared by the user tests (tests/integration/test_user_sim.py, test_user_edge.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.support import HELPERS, REPO, free_port

LOCUSTFILE = HELPERS / "locust_records.py"


def run_locust(
    tmp_path: Path,
    host: str,
    *args: str,
    users: int = 4,
    run_time: str = "3s",
    workload: str = "short_qa",
    locustfile: Path = LOCUSTFILE,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> tuple[subprocess.CompletedProcess, list[dict], dict[str, int]]:
    """Run Locust headless; returns (process, records, Locust's counts: requests, failures and
    per "METHOD name")."""
    records = tmp_path / f"records-{free_port()}.jsonl"
    stats_file = tmp_path / f"locust-{records.stem}"
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "-u", str(users), "-r", str(users),
           "-t", run_time, "--host", host, "--stop-timeout", "30", "--json-file", str(stats_file),
           *args]  # fmt: skip
    full_env = {**os.environ, "SWARM_TEST_RECORDS": str(records), "SWARM_TEST_WORKLOAD": workload,
                "PYTHONUNBUFFERED": "1", **(env or {})}  # fmt: skip
    if "OPENAI_API_KEY" not in (env or {}):
        full_env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=REPO, timeout=timeout)
    recs = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
    counts = {"requests": 0, "failures": 0}
    stats = Path(f"{stats_file}.json")
    if stats.exists():  # Locust's own per-name stats, written at shutdown
        for entry in json.loads(stats.read_text()):
            counts["requests"] += entry["num_requests"]
            counts["failures"] += entry["num_failures"]
            counts[f"{entry['method']} {entry['name']}"] = entry["num_requests"]
    return proc, recs, counts
