"""Each server family's names for the swarm's fields (swarm/core/server_families.py): the table
against the option's choices, what a family has and lacks, and the family detected from the names.
Scrapes read with these names: tests/unit/analysis/test_server_metrics_families.py."""

from __future__ import annotations

from swarm.core.options import SERVER_FAMILY_NAMES
from swarm.core.server_families import FAMILIES, FAMILY_NAMES, LLAMACPP, SGLANG, TGI, detect


def test_detection():
    assert detect({"sglang:num_running_reqs"}) == "sglang"
    assert detect({"tgi_queue_size", "process_cpu_seconds_total"}) == "tgi"
    assert detect({"trtllm:e2e_request_latency_seconds_bucket"}) == "trtllm"
    assert detect({"time_to_first_token_seconds_bucket", "request_success_total"}) == "trtllm"
    assert detect({"time_to_first_token_seconds_bucket"}) == "unknown"  # one generic name is no family
    assert detect({"python_gc_objects_collected_total"}) == "unknown"


def test_the_families_and_the_option_agree():
    assert ("auto", *FAMILY_NAMES, "none") == SERVER_FAMILY_NAMES
    assert tuple(FAMILIES) == FAMILY_NAMES
    assert (
        SGLANG.metric("waiting") == "sglang:num_queue_reqs"
        and SGLANG.named("running") == "; sglang:num_running_reqs"
    )
    assert TGI.metric("kv_usage") == "tgi_batch_current_max_tokens / tgi_batch_max_total_tokens"
    assert LLAMACPP.lacks("preemptions") and LLAMACPP.named("preemptions") == ""
