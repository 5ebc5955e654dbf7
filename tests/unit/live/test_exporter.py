"""/metrics text: counters equal what the workers sent, buckets are exact counts (`promtool check
metrics` on it: tests/integration/test_exporter.py)."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.core.buckets import VLLM_E2E_BUCKETS, VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS
from swarm.core.records import OUTCOMES
from swarm.live.exporter import ExportState, render
from swarm.stats.aggregate import Aggregate
from tests.helpers.synthetic import MODELS, SECRET, exact_values, exporter_records, exporter_text


@pytest.fixture(scope="module")
def records():
    return exporter_records()


@pytest.fixture(scope="module")
def text(records) -> str:
    return exporter_text(records)


def _samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_counters_equal_the_sums_sent(text, records):
    samples = _samples(text)
    for wl, model in ((wl, m) for wl in ("short_qa", "chat") for m in MODELS):
        mine = [r for r in records if r.workload == wl and r.model == model]
        assert mine
        base = (
            ("class", "direct"),
            ("endpoint", "unknown"),  # records made outside a run name no endpoint
            ("model", model),
            ("model_name", "Qwen/Qwen3-27B"),
            ("run_id", "run-1"),
            ("workload", wl),
        )
        for o in OUTCOMES:
            key = ("swarm_requests_total", tuple(sorted((*base, ("outcome", o.value)))))
            assert samples[key] == sum(r.outcome is o for r in mine)
        assert samples[("swarm_output_tokens_total", base)] == sum(r.output_tokens for r in mine)
        assert samples[("swarm_prompt_tokens_total", base)] == sum(r.prompt_tokens for r in mine)
        assert samples[("swarm_reasoning_tokens_total", base)] == sum(r.reasoning_tokens for r in mine)
        for lat in ("ttft", "itl", "e2e", "tpot", "ttfa"):
            values = exact_values(mine, lat)
            assert samples[(f"swarm_{lat}_seconds_count", base)] == len(values)
            assert samples[(f"swarm_{lat}_seconds_sum", base)] == pytest.approx(math.fsum(values), rel=1e-9)
            for le in (0.005, 0.02, 0.1, 0.25, 1.0, 7680.0):
                key = (f"swarm_{lat}_seconds_bucket", tuple(sorted((*base, ("le", str(le))))))
                assert samples[key] == sum(v <= le for v in values)
    run = (("model_name", "Qwen/Qwen3-27B"), ("run_id", "run-1"))
    assert samples[("swarm_users", run)] == 64 and samples[("swarm_workers", run)] == 3
    assert samples[("swarm_stage", run)] == 1 and samples[("swarm_degraded_workers", run)] == 1


def test_every_vllm_bucket_boundary_is_present(text):
    les = {
        float(s.labels["le"])
        for fam in text_string_to_metric_families(text)
        if fam.name == "swarm_ttft_seconds"
        for s in fam.samples
        if s.name.endswith("_bucket")
    }
    assert set(VLLM_TTFT_BUCKETS) | set(VLLM_ITL_BUCKETS) | set(VLLM_E2E_BUCKETS) | {math.inf} <= les


def test_no_request_contents_or_secrets(text):
    assert SECRET not in text and "Unauthorized" not in text
    names = {fam.name for fam in text_string_to_metric_families(text)}
    assert names == {
        "swarm_ttft_seconds",
        "swarm_ttfa_seconds",
        "swarm_itl_seconds",
        "swarm_tpot_seconds",
        "swarm_e2e_seconds",
        "swarm_send_lag_seconds",
        "swarm_ttftc_seconds",
        "swarm_task_seconds",
        "swarm_requests",
        "swarm_prompt_tokens",
        "swarm_output_tokens",
        "swarm_reasoning_tokens",
        "swarm_users",
        "swarm_workers",
        "swarm_stage",
        "swarm_degraded_workers",
        "swarm_goodput_requests",  # (no samples without --goodput)
        "swarm_goodput_judged_requests",
    }


def test_empty_aggregate_renders():
    text = render(ExportState(Aggregate(), run_id="r")).decode()
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert any(line.startswith("swarm_users{") for line in samples)
    assert not any(line.startswith("swarm_requests_total") for line in samples)


def test_run_info_is_one_series_with_the_run_s_provenance():
    labels = {
        "version": "0.2.0",
        "target_family": "vllm",
        "target_version": "0.11.0",
        "model": "m",
        "workload": "chat",
    }
    text = render(ExportState(Aggregate(), run_id="r", run_info=labels)).decode()
    info = [(name, lab, v) for (name, lab), v in _samples(text).items() if name == "swarm_run_info"]
    assert info == [("swarm_run_info", tuple(sorted({**labels, "run_id": "r"}.items())), 1.0)]
    bare = render(ExportState(Aggregate(), run_id="r")).decode()  # nothing known: no series at all
    assert "swarm_run_info" not in bare
