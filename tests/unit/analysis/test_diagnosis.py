"""The whole diagnosis on hand-built stage tables (REFERENCE.md §1): what it says without server
metrics, and the same findings from each family's own gauges (SGLang, TGI, TensorRT-LLM scrapes as
their exporters write them, tests/unit/analysis/family_texts.py), worded with the family's names."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swarm.analysis.diagnosis import diagnose
from swarm.analysis.server_metrics import stage_stats
from swarm.analysis.server_parse import parse_metrics
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis import family_texts as ft
from tests.unit.analysis.helpers import rows

# users, QPS, TTFT p99: QPS stops growing from 64 to 128 users while TTFT p99 triples
SWEEP = [(32, 8.0, 0.30), (64, 15.0, 0.35), (128, 15.2, 1.10)]


def test_no_server_metrics_is_said():
    kinds = [f.kind for f in diagnose(rows(SHORT_QA), {})]
    assert "no_server_metrics" in kinds and "saturation" in kinds


def test_an_unobservable_server_is_said_with_its_reason_and_only_client_signals_are_used():
    found = diagnose(rows(SWEEP), {}, source="none", unobservable="HTTP 404 at http://ollama:11434/metrics")
    none = [f for f in found if f.kind == "no_server_metrics"]
    assert none and none[0].text.startswith(
        "Server side not observable (HTTP 404 at http://ollama:11434/metrics): the diagnosis uses the "
        "client's own signals only"
    )
    assert {f.kind for f in found} <= {"no_server_metrics", "saturation", "client_bound"}


def _server(build: Callable[[int, int], str], sweep: Sequence[tuple[int, float, float]], source: str):
    """Per-stage statistics from scrapes every 3 s: `build(stage, scrape)` writes each one."""
    table = rows(sweep)
    snaps = [parse_metrics(build(r.stage, k), ts=r.start_s + 3.0 * k) for r in table for k in range(10)]
    assert {s.source for s in snaps} == {source}
    return table, stage_stats(snaps, [(r.stage, r.start_s, r.end_s) for r in table])


def _finding(found, kind):
    hits = [f for f in found if f.kind == kind]
    assert len(hits) == 1, [(f.kind, f.text) for f in found]
    return hits[0]


def test_sglang_sequence_cap_from_its_gauges():
    gauges = {0: (32, 0, 0.20), 1: (64, 0.3, 0.30), 2: (64, 64, 0.35)}  # running, queue, token_usage

    def build(stage: int, k: int) -> str:
        run, queue, usage = gauges[stage]
        return ft.sglang(run, queue, usage, prompt=1000 * (10 * stage + k), tp_ranks=2)

    table, server = _server(build, SWEEP, "sglang")
    assert server[2].running_max == 64  # the second TP rank's copy is not added
    cap = _finding(diagnose(table, server, source="sglang"), "max_num_seqs_cap")
    assert cap.stage == 2 and "pinned at 64" in cap.text and "64.0 waited" in cap.text
    assert "sglang:num_running_reqs" in cap.text and "sglang:num_queue_reqs" in cap.text
    assert "KV token usage only 35%" in cap.text and "--max-running-requests" in cap.text


def test_sglang_kv_bound_from_token_usage_and_retractions():
    gauges = {0: (32, 0, 0.40), 1: (60, 2, 0.93), 2: (62, 60, 0.97)}

    def build(stage: int, k: int) -> str:
        run, queue, usage = gauges[stage]
        return ft.sglang(run, queue, usage, retracted=(0 if stage == 0 else 3 * (10 * stage + k)))

    table, server = _server(build, SWEEP, "sglang")
    assert server[1].preemptions == 60 - 30  # the counter at the next stage's first scrape less at this one's
    kv = _finding(diagnose(table, server, source="sglang"), "kv_bound")
    assert kv.stage == 1 and "KV token usage peaked at 93%" in kv.text
    assert (
        "30 retractions (sglang:num_retracted_requests_total)" in kv.text
        and "--mem-fraction-static" in kv.text
    )


def test_tgi_sequence_cap_and_kv_bound_from_its_batch_gauges():
    cap_gauges = {0: (32, 0, 12_000), 1: (64, 0.3, 20_000), 2: (64, 60, 21_000)}  # batch, queue, reserved
    kv_gauges = {0: (32, 0, 20_000), 1: (58, 2, 47_500), 2: (60, 60, 48_500)}
    for gauges, kind in ((cap_gauges, "max_num_seqs_cap"), (kv_gauges, "kv_bound")):

        def build(stage: int, k: int, g=gauges) -> str:
            batch, queue, reserved = g[stage]
            return ft.tgi(batch, queue, reserved, 50_000, success=10 * (10 * stage + k))

        table, server = _server(build, SWEEP, "tgi")
        found = diagnose(table, server, source="tgi")
        f = _finding(found, kind)
        if kind == "max_num_seqs_cap":
            assert (
                f.stage == 2 and "pinned at 64" in f.text and "(mean 64.0; tgi_batch_current_size)" in f.text
            )
            assert "batch token budget reserved only 42%" in f.text and "--max-batch-size" in f.text
        else:
            assert f.stage == 1 and "batch token budget reserved peaked at 95%" in f.text
            assert "tgi_batch_current_max_tokens / tgi_batch_max_total_tokens" in f.text
            assert "(tgi_queue_size)" in f.text and "--max-total-tokens" in f.text
        # TGI has no TTFT histogram: said, not a gap
        ttft = [x for x in found if x.kind == "client_vs_server"]
        assert ttft and "TGI exposes no TTFT histogram" in ttft[0].text


def test_trtllm_older_collector_without_gauges_is_not_called_compute_bound():
    table, server = _server(lambda stage, k: ft.trtllm(""), SWEEP, "trtllm")
    found = diagnose(table, server, source="trtllm")
    none = _finding(found, "no_server_metrics")
    assert none.stage == 1 and "TensorRT-LLM's metrics hold no running, waiting or KV gauges" in none.text
    assert not [f for f in found if f.kind in ("compute_bound", "outside_engine")]
