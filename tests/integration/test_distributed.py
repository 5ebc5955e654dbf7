"""`swarm run` and plain Locust master + worker processes against the simulator, end to end.

The master's totals must equal the simulator's own counters exactly, every request the
simulator saw must be recorded exactly once, and the summary's percentiles must agree with the
exact percentiles of the raw records (numpy, 'lower' method) within 1%.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import netns
from tests.helpers.support import REPO, sim_server, start, swarm_cmd, wait_http

pytestmark = pytest.mark.integration


def counter_sums(metrics_text: str) -> dict[str, float]:
    sums: dict[str, float] = {}
    for fam in text_string_to_metric_families(metrics_text):
        for s in fam.samples:
            if s.name.endswith("_total"):
                sums[s.name] = sums.get(s.name, 0.0) + s.value
    return sums


def trace_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def assert_reconciled(
    summary: dict, server: dict[str, float], trace: list[str], records_ids: list[str]
) -> None:
    total = summary["total"]
    assert total["requests"] == len(trace) == server["vllm:request_success_total"], (total, server)
    assert total["prompt_tokens"] == server["vllm:prompt_tokens_total"]
    assert total["output_tokens"] == server["vllm:generation_tokens_total"]
    assert sorted(records_ids) == sorted(trace)  # every request recorded exactly once
    assert len(set(records_ids)) == len(records_ids)


def test_swarm_run_master_totals_equal_simulator_counters(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", "--seed", "7") as sim:
        out = tmp_path / "run"
        p = subprocess.run(
            swarm_cmd(
                "run",
                "--host",
                sim.url,
                "--workers",
                "2",
                "-u",
                "12",
                "-t",
                "8s",
                "--workload",
                "short_qa:3,chat:1",
                "--out",
                str(out),
                "--",
                "--max-tokens",
                "48",
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        server = counter_sums(sim.metrics_text())
        trace = trace_ids(sim.trace)
    summary = json.loads((out / "summary.json").read_text())
    table = pq.read_table(out / "requests.parquet").to_pandas()
    assert summary["workers"] == 2 and not summary["degraded"]
    assert set(summary["workloads"]) == {"short_qa", "chat"}
    assert summary["short_qa"]["requests"] + summary["chat"]["requests"] == summary["total"]["requests"]
    assert len(trace) > 200, "the run should have sent a few hundred requests at least"
    assert_reconciled(summary, server, trace, table["request_id"].tolist())
    # the table printed at the end shows the same totals
    total_row = next(line.split() for line in p.stdout.splitlines() if line.startswith("total "))
    assert total_row[1] == str(summary["total"]["requests"]), p.stdout
    # percentiles within 1% of the exact ones on the raw records (ok, not warm-up)
    ok = table[(table.outcome == "ok") & ~table.warmup]
    for metric in ("ttft", "e2e", "tpot"):
        values = ok[f"{metric}_s"].dropna().to_numpy()
        for q in (50, 90, 99):
            exact = float(np.percentile(values, q, method="lower"))
            got = summary["total"][f"{metric}_s"][f"p{q}"]
            assert got == pytest.approx(exact, rel=0.01), (metric, q, got, exact)
    itl = np.concatenate([np.asarray(v) for v in ok["itl_s"] if len(v)])
    assert summary["total"]["itl_s"]["p99"] == pytest.approx(
        float(np.percentile(itl, 99, method="lower")), rel=0.01
    )


@pytest.mark.parametrize(
    "slo, code, line",
    [
        ("error_rate<=1%,ttft_p99<=30s", 0, "SLO PASS: total.ttft_p99 <= 30.000s"),
        ("ttft_p99<=0.001ms,error_rate<=1%", 1, "SLO FAIL: total.ttft_p99 <= 0.0ms"),
    ],
)
def test_swarm_run_slo_exit_codes(tmp_path, slo, code, line):
    with sim_server(tmp_path, "--profile", "instant") as sim:
        p = subprocess.run(
            swarm_cmd(
                "run",
                "--host",
                sim.url,
                "--workers",
                "2",
                "-u",
                "4",
                "-t",
                "4s",
                "--workload",
                "short_qa",
                "--slo",
                slo,
                "--out",
                str(tmp_path / "o"),
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert p.returncode == code, p.stdout + p.stderr
    assert line in p.stdout, p.stdout


def test_master_workers_and_target_in_their_own_network_namespaces(tmp_path):
    """Nothing may assume localhost: each process sits on its own host address."""
    reason = netns.available()
    if reason:
        pytest.skip(reason)
    py = sys.executable
    out = tmp_path / "run"
    with netns.hosts("target", "master", "w1", "w2") as h:
        target = f"http://{h['target'].address}:8000"
        sim_cmd = h["target"].cmd(
            [
                py,
                "-m",
                "swarm",
                "sim",
                "--host",
                h["target"].address,
                "--port",
                "8000",
                "--profile",
                "instant",
                "--model",
                "ns-model",
                "--trace",
                str(tmp_path / "trace.jsonl"),
            ]
        )
        with start(sim_cmd, tmp_path / "sim.log") as sim:
            probe = h["master"].cmd(
                [py, "-c", f"import urllib.request as u; u.urlopen('{target}/health', timeout=2)"]
            )
            for _ in range(100):
                if subprocess.run(probe, capture_output=True).returncode == 0:
                    break
                assert sim.popen.poll() is None, sim.output()
                import time

                time.sleep(0.2)
            locust = [py, "-m", "locust", "-f", str(REPO / "swarm" / "locustfile.py")]
            common = [
                "--host",
                target,
                "--workload",
                "short_qa",
                "--swarm-out",
                str(out),
                "--run-id",
                "netns",
            ]
            master_cmd = h["master"].cmd(
                [
                    *locust,
                    "--master",
                    "--headless",
                    "--master-bind-host",
                    h["master"].address,
                    "--master-bind-port",
                    "5557",
                    "--expect-workers",
                    "2",
                    "--expect-workers-max-wait",
                    "30",
                    "-u",
                    "6",
                    "-r",
                    "6",
                    "-t",
                    "6s",
                    "--stop-timeout",
                    "30",
                    "--prometheus-port",
                    "9646",
                    *common,
                ]
            )
            with (
                start(master_cmd, tmp_path / "master.log") as master,
                start(
                    h["w1"].cmd(
                        [
                            *locust,
                            "--worker",
                            "--master-host",
                            h["master"].address,
                            "--master-port",
                            "5557",
                            *common,
                        ]
                    ),
                    tmp_path / "w1.log",
                ),
                start(
                    h["w2"].cmd(
                        [
                            *locust,
                            "--worker",
                            "--master-host",
                            h["master"].address,
                            "--master-port",
                            "5557",
                            *common,
                        ]
                    ),
                    tmp_path / "w2.log",
                ),
            ):
                assert master.wait(timeout=120) == 0, master.output()
            scrape = subprocess.run(
                h["master"].cmd(
                    [
                        py,
                        "-c",
                        f"import urllib.request as u; print(u.urlopen('{target}/metrics').read().decode())",
                    ]
                ),
                capture_output=True,
                text=True,
                timeout=30,
            )
            server = counter_sums(scrape.stdout)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workers"] == 2
    assert summary["model_name"] == "ns-model"  # discovered from the target's /v1/models over the bridge
    from swarm.core.recordfile import read_table

    records = read_table(out / "records").column("request_id").to_pylist()
    assert_reconciled(summary, server, trace_ids(tmp_path / "trace.jsonl"), records)
    assert len(records) > 50


def test_prometheus_endpoint_on_master_passes_promtool(tmp_path):
    """The headless master's --prometheus-port serves promtool-clean text with the swarm's metric names."""
    with sim_server(tmp_path, "--profile", "instant") as sim:
        from tests.helpers.support import free_port

        port = free_port()
        cmd = swarm_cmd(
            "run",
            "--host",
            sim.url,
            "--workers",
            "2",
            "-u",
            "4",
            "-t",
            "6s",
            "--workload",
            "short_qa",
            "--prometheus-port",
            str(port),
            "--out",
            str(tmp_path / "o"),
        )
        with start(cmd, tmp_path / "run.log") as run:
            wait_http(f"http://127.0.0.1:{port}/metrics", timeout=60, proc=run.popen, log=run.log)
            import time
            import urllib.request

            deadline = time.monotonic() + 30  # the first worker report lands after ~3 s
            while True:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                if 'workload="short_qa"' in text or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert run.wait(timeout=120) == 0, run.output()
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    names = {f.name for f in text_string_to_metric_families(text)}
    for name in (
        "swarm_ttft_seconds",
        "swarm_ttfa_seconds",
        "swarm_itl_seconds",
        "swarm_tpot_seconds",
        "swarm_e2e_seconds",
        "swarm_requests",
        "swarm_output_tokens",
        "swarm_users",
        "swarm_workers",
        "swarm_stage",
    ):
        assert name in names, (name, sorted(names))
    assert 'run_id="' in text and 'workload="short_qa"' in text


def test_requests_in_flight_at_the_end_are_counted_once(tmp_path):
    """Requests still streaming when the run time is up finish (--stop-timeout) and reach the
    summary as well as the records: nothing lost between the master's totals and the disk."""
    with sim_server(tmp_path, "--profile", "rtx5090x4-qwen3.6-27b") as sim:
        out = tmp_path / "run"
        p = subprocess.run(
            swarm_cmd(
                "run",
                "--host",
                sim.url,
                "--workers",
                "2",
                "-u",
                "6",
                "-t",
                "3s",
                "--workload",
                "chat",
                "--out",
                str(out),
                "--",
                "--max-tokens",
                "400",
                "--ignore-eos",
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        server = counter_sums(sim.metrics_text())
        trace = trace_ids(sim.trace)
    summary = json.loads((out / "summary.json").read_text())
    records = pq.read_table(out / "requests.parquet").to_pandas()
    assert records["e2e_s"].min() > 5.0  # each request outlasted the run time and the old 5 s wait
    assert_reconciled(summary, server, trace, records["request_id"].tolist())
    assert not summary["degraded"]
