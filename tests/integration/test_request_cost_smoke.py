"""`benchmarks/request_cost.py` (the request path's CPU cost, part of `make bench`) in a tiny
mode: it runs its cases in a measuring process and under callgrind, prints its table and writes
its figures with sane values; it refuses a tree that is not one, and a tree whose modules would
come from elsewhere. Not a timed test: no figure is held to a target here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers.support import REPO

pytestmark = pytest.mark.integration

BENCH = REPO / "benchmarks" / "request_cost.py"
CASES = ("parts-events", "parts-all", "send-events", "send-all")


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


@pytest.mark.serial
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_request_cost_writes_its_figures(tmp_path):
    out = tmp_path / "cost.json"
    proc = bench(
        "--requests", "8", "--repeat", "2", "--callgrind", "--callgrind-requests", "2", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    # the fixed response: the simulator's answer to max_tokens 64 with ignore_eos
    resp = r["response"]
    assert resp["token_chunks"] == 64 and resp["sse_events"] == 64 + 3  # role, usage, [DONE]
    assert r["requests"] == 8 and r["repeat"] == 2 and r["callgrind_requests"] == 2
    [tree] = r["trees"]
    assert tree["code"] == str(REPO)
    assert set(tree["cases"]) == set(CASES)
    for name, c in tree["cases"].items():
        assert c["chunks_per_request"] == resp["token_chunks"], name  # every token chunk was timed
        assert len(c["us_per_request_runs"]) == 2 and all(us > 0 for us in c["us_per_request_runs"]), name
        assert c["us_per_request"] > 0 and c["us_per_chunk"] == pytest.approx(c["us_per_request"] / 64)
        assert c["instructions_per_request"] > 0, name
        assert c["instructions_per_chunk"] == pytest.approx(c["instructions_per_request"] / 64)
    for case in CASES:
        assert any(line.startswith(case) for line in proc.stdout.splitlines()), proc.stdout
    assert "instr/req" in proc.stdout and "64 token chunks" in proc.stdout


def test_request_cost_refuses_a_foreign_module(tmp_path):
    """A tree that lacks a module, answered from another tree (what an editable install's finder
    does for `import swarm.x`): refused in one line, not measured as a mix of two trees."""
    shutil.copytree(
        REPO / "swarm", tmp_path / "swarm", ignore=shutil.ignore_patterns("models", "__pycache__")
    )
    (tmp_path / "swarm" / "live" / "recorder.py").unlink()
    with (tmp_path / "swarm" / "live" / "__init__.py").open("a") as f:
        f.write(f"\n__path__.append({str(REPO / 'swarm' / 'live')!r})\n")
    proc = bench("--code", str(tmp_path), "--requests", "1", "--repeat", "1", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert f"swarm modules loaded from outside {tmp_path / 'swarm'}: swarm.live.recorder" in err[0], err


def test_request_cost_bad_code_dir_is_a_usage_error(tmp_path):
    proc = bench("--code", str(tmp_path / "nowhere"), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"request_cost.py: --code {tmp_path / 'nowhere'}: no swarm package there "
        f"(expected {tmp_path / 'nowhere'}/swarm/__init__.py)"
    ]
