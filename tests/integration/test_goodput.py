"""--goodput end to end: `swarm run` with 1 and 3 workers against the simulator (two stages with a
warm-up, two workloads, two request classes, two served models, injected HTTP 500s), and the
goodput counts of summary.json equal a recount from requests.parquet exactly, per stage, workload,
class and model. The recount is written here with pandas, independently of swarm/stats/goodput.py."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pyarrow.parquet as pq
import pytest

from swarm.orchestrate.commands import locust_command
from tests.helpers.support import free_port, sim_server, start, swarm_cmd

pytestmark = [pytest.mark.serial, pytest.mark.integration]
TTFT_S, E2E_S = 0.004, 10.0  # the instant simulator answers around a few ms: both good and bad ones
GOODPUT = f"ttft<={TTFT_S * 1000:g}ms,e2e<={E2E_S:g}s"


def recount(df: pd.DataFrame) -> tuple[int, int]:
    """(good, judged): judged = not warm-up and not cancelled; good = ok and both bounds hold."""
    judged = df[~df.warmup & (df.outcome != "cancelled")]
    good = judged[(judged.outcome == "ok") & (judged.ttft_s <= TTFT_S) & (judged.e2e_s <= E2E_S)]
    return len(good), len(judged)


def check(block: dict, df: pd.DataFrame, where: str) -> None:
    good, judged = recount(df)
    g = block["goodput"]
    assert (g["met"], g["slo"]) == (good, GOODPUT), where
    assert g["share"] == pytest.approx(good / judged, rel=1e-12), where


@pytest.mark.parametrize("workers", [1, 3])
def test_goodput_counts_equal_a_recount_from_the_records(tmp_path, workers):
    out = tmp_path / "run"
    with sim_server(tmp_path, "--profile", "instant", "--fault", "http_500=0.05", trace=False,
                    model="base,lora") as s:  # fmt: skip
        cmd = swarm_cmd("run", "--host", s.url, "--workers", str(workers), "-u", "6", "--sweep", "3,6",
                        "--stage-time", "4s", "--warmup", "1s", "--out", str(out),
                        "--workload", "short_qa:3,chat:1", "--model", "base:3,lora:1", "--goodput", GOODPUT,
                        "--", "--max-tokens", "12", "--thinking-ratio", "0.3")  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]  # 1: Locust's, for the 500s
    df = pq.read_table(out / "requests.parquet").to_pandas()
    s = json.loads((out / "summary.json").read_text())
    good, judged = recount(df)
    assert 0 < good < judged and df.warmup.any() and (df.outcome == "http_error").any()
    check(s["total"], df, "total")
    for name in ("short_qa", "chat"):
        check(s[name], df[df.workload == name], name)
        for klass, block in s["classes"][name].items():
            check(block, df[(df.workload == name) & (df.request_class == klass)], f"{name}/{klass}")
        assert set(s["classes"][name]) == {"direct", "thinking"}
    for model in ("base", "lora"):
        check(s["models"][model], df[df.model == model], f"model {model}")
    for st in s["stages"]:
        sent = df[df.stage == st["stage"]]
        check(st["total"], sent, f"stage {st['stage']}")
        for name in ("short_qa", "chat"):
            check(st[name], sent[sent.workload == name], f"stage {st['stage']} {name}")
        g = st["total"]["goodput"]  # a rate of good completions: never above the stage's QPS
        assert 0 < g["rate"] <= st["total"]["qps"]
    assert "good/s" in p.stdout and "95% confidence intervals" in p.stdout


def test_plain_locust_workers_learn_goodput_from_the_master(tmp_path):
    """`locust -f` with --goodput on the master only: Locust hands the option to the workers with the
    spawn message, and they judge their records by it."""
    out, port = tmp_path / "out", free_port()
    locust = locust_command()
    with sim_server(tmp_path, "--profile", "instant", trace=False) as s:
        master = [*locust, "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                  str(port), "--expect-workers", "2", "--expect-workers-max-wait", "60", "-u", "4", "-r", "4",
                  "-t", "4s", "--host", s.url, "--workload", "short_qa", "--max-tokens", "8",
                  "--swarm-out", str(out), "--goodput", GOODPUT, "--only-summary"]  # fmt: skip
        worker = [
            *locust,
            "--worker",
            "--master-host",
            "127.0.0.1",
            "--master-port",
            str(port),
            "--host",
            s.url,
        ]
        with (
            start(master, tmp_path / "master.log") as m,
            start(worker, tmp_path / "w0.log"),
            start(worker, tmp_path / "w1.log"),
        ):
            assert m.popen.wait(timeout=120) == 0, m.output()[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    df = pq.read_table(pq.ParquetDataset(out / "records").files).to_pandas()  # both workers' parts
    assert summary["workers"] == 2 and len(df) == summary["total"]["requests"]
    good, judged = recount(df)
    assert summary["total"]["goodput"]["met"] == good > 0 and judged == len(df)
