"""`swarm run --host SIM1,SIM2` (issue 29, several endpoints): two `swarm sim` processes, SIM1 with a
scheduler cap of 2 (--max-num-seqs 2) and SIM2 with room; SIM2 is SIGKILLed half-way.

One run, real processes only. What must hold: the run completes; every request SIM1 answered is
recorded once (its ok records = its own vllm:request_success_total, exactly; no request id twice);
SIM2's requests after its death all failed, counted with their reason (connection refused), and
the run's output and report name SIM2 as the endpoint that stopped answering, with that count;
each endpoint is diagnosed on its own: SIM1 sequence-capped, SIM2 not.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter

import pandas as pd
import pytest

from swarm.analysis.endpoints import outages
from swarm.core.recordfile import read_table
from tests.helpers.sim_http import scrape
from tests.helpers.support import REPO, sim_server, swarm_cmd, wait_for

pytestmark = [pytest.mark.serial, pytest.mark.slow]

PROFILE = "rtx5090x4-qwen3.6-27b"  # ~20 ms per step: 32 tokens take ~0.7 s, so requests overlap
RUN_S = 16


def success_total(url: str) -> float:
    return sum(v for (name, _), v in scrape(url).items() if name == "vllm:request_success_total")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("endpoints")
    out = tmp / "run"
    with (
        sim_server(tmp, "--profile", PROFILE, "--max-num-seqs", "2") as capped,
        sim_server(tmp, "--profile", PROFILE) as dying,
    ):
        cmd = swarm_cmd("run", "--host", f"{capped.url},{dying.url}", "--workers", "1", "-u", "12",
                        "-t", f"{RUN_S}s", "--workload", "short_qa", "--max-tokens", "32", "--ignore-eos",
                        "--model", "sim-model", "--out", str(out))  # fmt: skip
        p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def answered() -> bool:
            if p.poll() is not None:
                raise AssertionError(f"swarm run ended early ({p.returncode}): {p.communicate()}")
            return success_total(dying.url) >= 20

        wait_for(answered, 60, "SIM2 to answer 20 requests")
        time.sleep(RUN_S / 2 - 4)  # about half-way through the load
        dying.proc.signal(signal.SIGKILL)
        killed_at = time.time()
        stdout, stderr = p.communicate(timeout=120)
        survivor_success = success_total(capped.url)
    records = read_table(out / "records").to_pylist()
    return {"p": p, "out": out, "stdout": stdout, "stderr": stderr, "records": records,
            "capped": capped.url, "dying": dying.url, "killed_at": killed_at,
            "survivor_success": survivor_success}  # fmt: skip


def test_the_run_completes_and_the_survivors_requests_are_recorded_once(run):
    p = run["p"]
    assert p.returncode in (0, 1), run["stdout"][-3000:] + run["stderr"][-3000:]  # 1: requests failed
    assert "Traceback" not in run["stderr"], run["stderr"][-3000:]
    mine = [r for r in run["records"] if r["endpoint"] == run["capped"]]
    assert {r["endpoint"] for r in run["records"]} == {run["capped"], run["dying"]}
    ok = [r for r in mine if r["outcome"] == "ok"]
    assert len(ok) == run["survivor_success"] > 0  # exactly its own count
    ids = [r["request_id"] for r in mine if r["request_id"]]
    assert len(ids) == len(set(ids))
    summary = json.loads((run["out"] / "summary.json").read_text())
    per = summary["endpoints"]
    assert per[run["capped"]]["requests"] == len(mine)
    assert sum(b["requests"] for b in per.values()) == summary["total"]["requests"] == len(run["records"])


def test_the_dead_endpoints_failures_are_counted_with_their_reason_and_named(run):
    theirs = sorted(
        (r for r in run["records"] if r["endpoint"] == run["dying"]), key=lambda r: r["start_wall_s"]
    )
    after = [r for r in theirs if r["start_wall_s"] > run["killed_at"] + 0.5 and r["outcome"] != "cancelled"]
    assert after and all(r["outcome"] == "connect_error" for r in after), Counter(r["outcome"] for r in after)
    assert all("Connection refused" in r["error"] for r in after), {r["error"] for r in after}
    (o,) = outages(pd.DataFrame(run["records"]))
    assert o.label == run["dying"] and o.failed >= len(after) and o.by_outcome["connect_error"] >= len(after)
    assert abs(o.since_s - run["killed_at"]) < 2.0
    line = f"endpoint {run['dying']} stopped answering at "
    assert line in run["stdout"] and f"{o.failed} requests failed (" in run["stdout"], run["stdout"][-3000:]
    assert line in (run["out"] / "report.html").read_text()


def test_each_endpoint_is_diagnosed_on_its_own(run):
    found = json.loads((run["out"] / "diagnosis.json").read_text())
    capped = [f for f in found if f["kind"] == "max_num_seqs_cap"]
    assert [f["text"].split(": ", 1)[0] for f in capped] == [f"endpoint {run['capped']}"], found
    assert "pinned at 2 " in capped[0]["text"]
    differ = f"endpoint {run['capped']} is sequence-capped"
    assert any(f["kind"] == "endpoints_differ" and f["text"].startswith(differ) for f in found)
    assert differ in run["stdout"]
