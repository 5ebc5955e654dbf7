"""A dialect that misreads the target's streams is one line per run, not silent numbers: `swarm run
--dialect vllm` against the simulator's TGI face (no running usage, which the vllm dialect asks
for) prints swarm/client/mismatch.py's line on the console, once, though the worker's log is a
file. (Several workers' lines said once: tests/unit/client/test_mismatch.py; the detected dialect
saying nothing: tests/unit/client/test_dialects_families.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swarm.client.dialects import DIALECTS
from swarm.client.mismatch import mismatch_line
from tests.helpers.support import sim_server, swarm_cmd

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # ~25-40 s: a swarm run (master + worker)


def test_a_wrong_dialect_is_said_once_per_run(tmp_path: Path) -> None:
    line = mismatch_line(DIALECTS["vllm"], "no_running_usage")
    out = tmp_path / "run"
    with sim_server(tmp_path, "--server", "tgi", "--profile", "instant", trace=False) as sim:
        cmd = swarm_cmd("run", "--host", sim.url, "--workers", "1", "-u", "2", "-t", "2s")
        cmd += ["--workload", "short_qa", "--dialect", "vllm", "--out", str(out)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count(line) == 1, run.stderr[-3000:]
    assert line in (out / "worker-0.log").read_text()  # where the worker said it
