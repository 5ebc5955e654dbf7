"""The diagnosis held to injected causes (benchmarks/diagnosis_matrix.py --virtual): one sweep per
cause, then the confusion matrix of what the diagnosis named. The causes on the way to the user
(frontend, network, client_cpu) run in real time (`swarm run` and its simulator with one `swarm sim`
flag injecting the cause, the client's CPU starved by busy loops); the causes that live in the
engine (none, kv, seq_cap, compute) on the simulator's virtual clock (the same engine and flags,
the same run directory's files: swarm/orchestrate/virtual_run.py), where
tests/integration/test_diagnosis_virtual.py also holds them over many more cases. Two verdicts,
kept apart so a failure says which side is wrong: each cause physically there (the scenario), and
each cause named, trusted, with no other bottleneck kind (the diagnosis). ~2 minutes on a 2-core
machine (4 before the virtual clock: seven real-time sweeps)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from benchmarks.diagnosis_matrix import BY_CAUSE
from tests.helpers.support import REPO

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

HARNESS = REPO / "benchmarks" / "diagnosis_matrix.py"


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> tuple[list[dict], str]:
    """(outcomes per cause, the printed matrix and details) of one run of the whole harness."""
    tmp = tmp_path_factory.mktemp("matrix")
    results = tmp / "matrix.json"
    proc = subprocess.run(
        [sys.executable, str(HARNESS), "--virtual", "--out", str(tmp / "runs"), "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=560,
        cwd=REPO,
    )
    assert proc.returncode in (0, 1) and results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(results.read_text()), proc.stdout


def test_every_cause_is_run(matrix):
    outcomes, text = matrix
    causes = [o["cause"] for o in outcomes]
    assert causes == ["none", "frontend", "kv", "seq_cap", "compute", "network", "client_cpu"], text
    assert all(o["error"] is None for o in outcomes), text
    clocks = {o["cause"]: o["clock"] for o in outcomes}
    assert clocks == {c: "virtual" if BY_CAUSE[c].engine_only else "real" for c in causes}, clocks
    assert [c for c, clock in clocks.items() if clock == "real"] == ["frontend", "network", "client_cpu"]


def test_each_injected_cause_is_physically_there(matrix):
    """Judged on the simulator's trace and /metrics and the workers' CPU, not on the diagnosis."""
    outcomes, text = matrix
    wrong = {o["cause"]: o["physics_problems"] for o in outcomes if not o["physical"]}
    assert not wrong, f"{wrong}\n{text}"


def test_the_diagnosis_names_each_injected_cause_and_no_other(matrix):
    """frontend -> frontend_bound, network -> network_delay, kv -> kv_bound, seq_cap ->
    max_num_seqs_cap, compute -> compute_bound, client_cpu -> client_bound (untrusted by
    definition), each trusted otherwise and alone; nothing injected -> no bottleneck kind."""
    outcomes, text = matrix
    wrong = [o["cause"] for o in outcomes if not o["diagnosed"]]
    assert not wrong, f"diagnosed wrongly: {wrong}\n{text}"


def test_the_cap_and_the_kv_findings_say_what_to_change(matrix):
    """The findings' words, not only their kinds (moved here from tests/integration/test_sweep.py's
    `test_max_num_seqs_cap_is_named` and `test_small_kv_cache_is_named`, which ran a sweep each for
    the same two causes): the sequence cap names its value and the flag, the KV finding says KV."""
    outcomes, text = matrix
    by_cause = {o["cause"]: o for o in outcomes}

    def texts(cause: str, kind: str) -> list[str]:
        return [f["text"] for f in by_cause[cause]["findings"] if f["kind"] == kind]

    (cap_flag,) = [a for a in BY_CAUSE["seq_cap"].sim_args if a.startswith("--max-num-seqs=")]
    cap = cap_flag.split("=", 1)[1]
    cap_texts = texts("seq_cap", "max_num_seqs_cap")
    assert cap_texts, text
    assert re.search(rf"\b{cap}\b", cap_texts[0]) and "max-num-seqs" in cap_texts[0], cap_texts[0]
    kv_texts = texts("kv", "kv_bound")
    assert kv_texts and "KV" in kv_texts[0], (kv_texts, text)
