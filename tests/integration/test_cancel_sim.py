"""Clients that hang up (`--cancel 30%@first-token`) through a real `swarm run` on the embedded
simulator: the records cut by their client are exactly the requests the simulator aborted (its
per-request trace, matched by request id), every request sent is recorded once, the cut ones stay
out of the latency statistics and of the failures, and the run's output says so per stage."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.helpers.support import swarm_cmd

pytestmark = pytest.mark.integration


def test_cancelled_by_client_records_are_the_simulators_aborted_requests(tmp_path):
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "-u", "4", "-t", "3s", "--workers", "1", "--out", str(out),
                    "--workload", "synthetic", "--input-tokens", "64", "--output-tokens", "48",
                    "--seed", "7", "--cancel", "30%@first-token")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    df = pd.read_parquet(out / "requests.parquet")
    trace = [json.loads(line) for line in (out / "sim-trace.jsonl").read_text().splitlines()]
    # every request the simulator received is one record, and no record is of a request it never saw
    assert df.request_id.notna().all() and df.request_id.is_unique
    assert sorted(df.request_id) == sorted(t["id"] for t in trace)
    hung_up = set(df.request_id[df.outcome == "cancelled_by_client"])
    stopped = set(df.request_id[df.outcome == "cancelled"])  # (the stop's: none expected, apart anyway)
    aborted = {t["id"] for t in trace if t["finish_reason"] == "abort"}
    assert hung_up and aborted == hung_up | stopped, (len(hung_up), len(stopped), len(aborted))
    assert set(df.outcome) <= {"ok", "cancelled_by_client", "cancelled"}, df.outcome.value_counts()
    cut = df[df.outcome == "cancelled_by_client"]
    assert (cut.output_tokens >= 1).all() and (cut.output_tokens <= 2).all()  # at the first token
    assert cut.error.str.startswith("the client hung up at the first token").all()
    assert 0.05 < len(cut) / len(df) < 0.7, (len(cut), len(df))  # 30% of a few dozen (binomial)
    summary = json.loads((out / "summary.json").read_text())
    total = summary["total"]
    assert total["cancelled_by_client"] == len(cut) and total["requests"] == len(df)
    assert not sum(total["failures"].values()) and total["cancelled"] == len(stopped)
    ok = df[(df.outcome == "ok") & ~df.warmup]
    assert total["e2e_s"]["mean"] == pytest.approx(ok.e2e_s.mean(), rel=1e-9)  # the cut ones left out
    assert total["ttft_s"]["max"] == pytest.approx(ok.ttft_s.max(), rel=1e-9)
    assert f"cancelled by the client (--cancel): {len(cut)} of {len(df)} requests" in p.stdout
    findings = [f["text"] for f in json.loads((out / "diagnosis.json").read_text())]
    assert any(t.startswith(f"The client hung up on {len(cut)} requests") for t in findings), findings


def test_the_sglang_face_counts_the_hang_ups_as_its_aborted_requests(tmp_path):
    """SGLang counts a client's disconnect in `sglang:num_aborted_requests_total` (vLLM in no
    counter): the diagnosis sets the server's count beside the records cut by their client."""
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "-u", "4", "-t", "3s", "--workers", "1", "--out", str(out),
                    "--workload", "synthetic", "--input-tokens", "64", "--output-tokens", "48",
                    "--seed", "7", "--cancel", "30%@first-token", "--sim-arg=--server", "--sim-arg=sglang")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    df = pd.read_parquet(out / "requests.parquet")
    cut = int((df.outcome == "cancelled_by_client").sum())
    trace = [json.loads(line) for line in (out / "sim-trace.jsonl").read_text().splitlines()]
    assert cut > 0 and cut == sum(t["finish_reason"] == "abort" for t in trace)
    findings = [f["text"] for f in json.loads((out / "diagnosis.json").read_text())]
    said = f"The client hung up on {cut} requests (--cancel, cancelled_by_client); the server counted {cut} aborted"
    assert any(t.startswith(said) for t in findings), findings
