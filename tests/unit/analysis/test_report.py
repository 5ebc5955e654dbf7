"""swarm report: a synthetic sweep run directory (the seed's short-QA numbers) rendered to a
self-contained report.html with its plots, stages.csv and the diagnosis; robust to missing pieces."""

from __future__ import annotations

import html
import json
import re

import pandas as pd

from swarm.analysis.plots import PNGS
from swarm.analysis.report import write_report
from swarm.analysis.rundir import load_run, stage_rows
from tests.helpers.support import DATA
from tests.helpers.sweep_run import SHORT_QA, images, make_run


def test_report_holds_the_figures_and_is_self_contained(tmp_path):
    run = make_run(tmp_path / "run")
    path = write_report(run)
    text = path.read_text()
    imgs = images(text)
    assert len(imgs) == len(PNGS) and all(i.startswith(b"\x89PNG") and len(i) > 10_000 for i in imgs)
    for name in PNGS:
        assert (run / name).read_bytes().startswith(b"\x89PNG"), name
        assert f"({name})" in text
    # offline: no script, stylesheet, font or image from anywhere else; the charts' scripts inline
    assert "<link" not in text and "@import" not in text and "url(" not in text
    assert not re.search(r"<script[^>]*\bsrc\b", text)
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", text)
    assert "http://" not in text and "https://" not in text  # no host named anywhere (uPlot's banner dropped)


def test_report_diagnosis_and_tables(tmp_path):
    run = make_run(tmp_path / "run")
    text = write_report(run).read_text()
    found = {f["kind"]: f for f in json.loads((run / "diagnosis.json").read_text())}
    assert found["saturation"]["stage"] == 4 and "Ceiling at 200 users" in found["saturation"]["text"]
    assert found["kv_bound"]["stage"] == 4 and "96%" in found["kv_bound"]["text"]
    assert found["client_bound"]["stage"] == 5 and not found["client_bound"]["trusted"]
    assert "200 users" in found["slo_max_concurrency"]["text"]
    cvs = [
        f["text"] for f in json.loads((run / "diagnosis.json").read_text()) if f["kind"] == "client_vs_server"
    ]
    # the fixture's engine makes every first token 12 ms before the client reads it
    # (11 ms where a few requests straddle a scrape: read by the client just after it)
    assert re.search(r"by 1[12] ms to 12 ms on the same requests", cvs[0]) and "no bottleneck" in cvs[0]
    assert "frontend_bound" not in found and "network_delay" not in found
    assert "last scrape came 2.6 s before the client's last request finished" in cvs[1]
    assert "Ceiling at 200 users" in text and 'class="untrusted"' in text
    assert "Speculative decoding" in text and "<td>70%</td><td>3.10</td>" in text
    csv = pd.read_csv(run / "stages.csv")
    assert list(csv["users"]) == [10, 30, 64, 128, 200, 256]
    assert csv["qps"].round(1).tolist() == [13.4, 28.1, 45.2, 60.2, 64.9, 64.7]
    assert csv["srv_kv_max"].max() == 0.96 and csv["client_cpu_max_pct"].iloc[-1] == 96.0
    # server TTFT from histogram deltas is ~12 ms below the client's, per stage
    gap = (csv["ttft_p50_s"] - csv["srv_ttft_p50_s"]).abs()
    assert (gap < 0.06).all()


def test_rerender_from_files_is_stable(tmp_path):
    run = make_run(tmp_path / "run")
    first = write_report(run).read_text()
    assert write_report(run).read_text() == first


def test_without_server_metrics_cpu_or_users(tmp_path):
    run = make_run(tmp_path / "run", server=False, cpu=False, users_in_summary=False)
    text = write_report(run).read_text()
    assert "no server metrics" in text and "client-side numbers only" in text
    assert "estimated" in text
    assert len(images(text)) == 4  # no server timeline, no client-vs-server TTFT
    rows, estimated = stage_rows(
        json.loads((run / "summary.json").read_text()), pd.read_parquet(run / "requests.parquet")
    )
    assert estimated and all(r.users and r.start_s and r.end_s for r in rows)


def test_a_plain_locust_run_takes_client_boundness_from_the_summary(tmp_path):
    # no client_cpu.jsonl (plain `locust`, not `swarm run`): the plugin's live check in summary.json
    run = make_run(tmp_path / "run", cpu=False)
    s = json.loads((run / "summary.json").read_text())
    s["client_bound"] = [{"stage": 5, "worker": "worker-1", "cpu_percent": 97.3}]
    (run / "summary.json").write_text(json.dumps(s))
    text = write_report(run).read_text()
    [bound] = [f for f in json.loads((run / "diagnosis.json").read_text()) if f["kind"] == "client_bound"]
    assert bound["stage"] == 5 and not bound["trusted"] and "worker-1 needed 97%" in bound["text"]
    assert "256 users" in bound["text"] and 'class="untrusted"' in text
    note = "client saturation from the workers' own CPU reports in summary.json"
    assert any(note in n for n in load_run(run).notes) and html.escape(note) in text
    del s["client_bound"]  # none bound: no finding, the same note
    (run / "summary.json").write_text(json.dumps(s))
    text = write_report(run).read_text()
    assert "client_bound" not in (run / "diagnosis.json").read_text()
    assert html.escape(note) in text


def test_one_stage_only_and_no_records(tmp_path):
    run = make_run(tmp_path / "one", table=SHORT_QA[2:3], slo=None)
    text = write_report(run).read_text()
    # one stage: nothing varies "vs concurrency", so those two plots are left out
    assert len(images(text)) == len(PNGS) - 2
    assert "qps_vs_concurrency.png" not in text and "latency_vs_concurrency.png" not in text
    assert "throughput.png" in text
    assert "saturation" not in json.dumps(json.loads((run / "diagnosis.json").read_text()))
    bare = make_run(tmp_path / "bare", records=False, server=False, cpu=False)
    text = write_report(bare).read_text()
    assert "no request records" in text and len(images(text)) == 3
    assert len(load_run(bare).rows) == 6


def test_cli(tmp_path, capsys):
    import argparse

    import pytest

    from swarm.analysis import report
    from swarm.cli import COMMANDS
    from swarm.core.errors import UsageError

    assert COMMANDS["report"][0] == "swarm.analysis.report"
    parser = argparse.ArgumentParser()
    report.configure(parser)
    run = make_run(tmp_path / "run")
    assert report.main(parser.parse_args([str(run)])) == 0
    out = capsys.readouterr().out
    assert "Ceiling at 200 users" in out and "[not trusted]" in out and "report.html" in out
    with pytest.raises(UsageError):
        report.main(parser.parse_args([str(tmp_path / "nope")]))


def test_real_run_against_the_simulator(tmp_path):
    """tests/helpers/data/sim_sweep_run: Locust + swarm sim (--max-num-seqs 6) + ServerPoller, 5 stages."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "sim_sweep_run", run)
    text = write_report(run).read_text()
    assert len(images(text)) == len(PNGS)
    found = {f["kind"]: f["text"] for f in json.loads((run / "diagnosis.json").read_text())}
    assert "pinned at 6 " in found["max_num_seqs_cap"] and found["max_num_seqs_cap"].startswith("At 8 users")
    assert "Requests reconcile" in text and "Output tokens reconcile" in text
    csv = pd.read_csv(run / "stages.csv")
    assert list(csv["users"]) == [2, 4, 8, 12, 16]  # estimated: peak in flight (closed loop)
    assert csv["srv_running_max"].max() == 6


def test_missing_intervals_show_a_dash_and_their_reason(tmp_path):
    """Stages 1-2 of the fixture have under 368 requests: no p99 interval, '—' and the footnote."""
    run = make_run(tmp_path / "run")
    text = write_report(run).read_text()
    section = text[text.index("<h2>Confidence intervals (95%)") :]
    section = section[: section.index("<h2>", 5)]
    assert section.count("— [1]</td>") == 6  # TTFT, TPOT, E2E p99 of the first two stages
    assert "[1] p99 needs &gt;= 368 successful requests" in section and "[2]" not in section


def test_a_run_whose_swarm_run_was_killed_before_publishing_the_summary_reads_the_masters(tmp_path):
    """SIGKILL on `swarm run` after its master wrote summary.part.json: the report reads that, as
    it read the master's summary.json before summary.json was written once by swarm run."""
    from swarm.core.runfiles import SUMMARY, SUMMARY_PART

    run = make_run(tmp_path / "run")
    masters = json.loads((run / SUMMARY).read_text())
    (run / SUMMARY).rename(run / SUMMARY_PART)
    data = load_run(run)
    assert data.summary == masters and not any("no summary.json" in n for n in data.notes)
