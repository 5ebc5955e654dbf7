"""Server metrics are untrusted input (swarm/analysis/server_checks.py, server_trust.py): each
reported defect of issue 41 on a scrape a fake server could send, checked through the parser, the
per-stage statistics, the diagnosis and `swarm report DIR`."""

from __future__ import annotations

import argparse
import json
import math

from swarm.analysis import report
from swarm.analysis.diagnosis import diagnose
from swarm.analysis.server_metrics import stage_stats, window_stats
from swarm.analysis.server_parse import parse_metrics
from tests.helpers.sweep_run import make_run
from tests.unit.analysis import family_texts as ft
from tests.unit.analysis.helpers import rows

# users, QPS, TTFT p99: QPS stops growing from 64 to 128 users while TTFT p99 triples
SWEEP = [(32, 8.0, 0.30), (64, 15.0, 0.35), (128, 15.2, 1.10)]
CAP = {0: (32, 0, 0.20), 1: (64, 0.3, 0.30), 2: (64, 64, 0.35)}  # running, waiting, KV: capped at 64
CAUSES = {"max_num_seqs_cap", "kv_bound", "compute_bound", "outside_engine", "frontend_bound"}


def _sweep(text_of):
    """The sweep's rows, its scrapes (every 3 s, `text_of(stage, k)`), per-stage and run statistics."""
    table = rows(SWEEP)
    snaps = [parse_metrics(text_of(r.stage, k), ts=r.start_s + 3.0 * k) for r in table for k in range(10)]
    server = stage_stats(snaps, [(r.stage, r.start_s, r.end_s) for r in table])
    return table, server, window_stats(snaps, -1, snaps[0].ts, snaps[-1].ts)


def test_vllm_and_sglang_names_in_one_metrics_name_no_cause_and_ask_for_server_family():
    def text_of(stage, k):
        run, wait, kv = CAP[stage]
        return ft.vllm(run, wait, kv) + ft.sglang(1, 0, 0.1)

    table, server, run = _sweep(text_of)
    found = diagnose(table, server, source="vllm", run_server=run, client_total={"requests": 100})
    assert not {f.kind for f in found} & CAUSES, [(f.kind, f.text) for f in found]
    said = next(f for f in found if f.kind == "server_check_failed")
    assert "vLLM and SGLang" in said.text and "read as vLLM's" in said.text and "--server-family" in said.text
    assert not said.trusted


def test_a_negative_finished_counter_is_not_read_as_lost_requests():
    table, server, run = _sweep(lambda stage, k: ft.vllm(4, 0, 0.2, success=-289 if stage == 2 else 10 * k))
    found = diagnose(table, server, run_server=run, client_total={"requests": 289})
    texts = [f.text for f in found if f.kind == "client_vs_server"]
    assert not any("lost data" in t or "-289" in t.split("(")[0] for t in texts), texts
    assert any("Requests not reconciled" in t and "negative (-289)" in t for t in texts), texts


def test_a_counter_reset_is_a_restart_counted_on_not_lost_requests():
    # the finished counter climbs to 56, the server restarts, and it climbs again to 44: 100 finished
    counts = [0, 10, 30, 56, 0, 5, 20, 44, 44, 44]
    table, server, run = _sweep(lambda stage, k: ft.vllm(4, 0, 0.2, success=counts[k] if stage == 0 else 44))
    found = diagnose(table, server, run_server=run, client_total={"requests": 100})
    assert run.requests == 100 and run.resets == {"requests": 1}
    texts = [f.text for f in found]
    assert not any("fewer" in t or "lost data" in t for t in texts), texts
    assert any(t.startswith("Requests reconcile") and "across 1 restart" in t for t in texts), texts
    reset = next(f for f in found if f.kind == "server_counter_reset")
    assert "vllm:request_success_total 1 time" in reset.text and "increase()" in reset.text


def _inf_ttft_jsonl(path):
    """The run's scrapes, as the poller wrote them, with a TTFT histogram whose +Inf bucket and
    _count read +Inf (json writes `Infinity`)."""
    lines = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        ttft = d["histograms"]["ttft"]
        ttft["counts"][-1] = ttft["count"] = math.inf
        lines.append(json.dumps(d))
    path.write_text("\n".join(lines) + "\n")


def test_report_over_scrapes_with_an_infinite_ttft_count_writes_the_report_and_the_diagnosis(
    tmp_path, capsys
):
    run = make_run(tmp_path / "run")
    _inf_ttft_jsonl(run / "server_metrics.jsonl")
    parser = argparse.ArgumentParser()
    report.configure(parser)
    assert report.main(parser.parse_args([str(run)])) == 0
    assert (run / "report.html").exists()
    found = json.loads((run / "diagnosis.json").read_text())
    said = [f for f in found if f["kind"] == "server_check_failed"]
    assert said and "vllm:time_to_first_token_seconds a bucket +Inf" in said[0]["text"]
    assert not any(f["kind"] == "frontend_bound" for f in found)
    assert "report.html" in capsys.readouterr().out


def test_an_infinite_histogram_parses_to_a_rejected_figure():
    snap = parse_metrics(ft.vllm(3, 0, 0.2, ttft_counts=[1] * 16 + ["+Inf"]), ts=1.0)
    assert "ttft" not in snap.histograms and snap.rejected == {"ttft": "a bucket +Inf"}
