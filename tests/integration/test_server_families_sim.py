"""Each family's /metrics read by the swarm's own poller and parser (swarm/core/server_families.py)
against `swarm sim --server sglang|tgi|trtllm`: the family detected from the names, and the
normalised counters' increase over a few streamed requests equal to the usage the responses
carried (the client's own count); what the family lacks stays None. The faces' shapes are checked
against the sources in tests/unit/sim and tests/integration/test_sim_families.py."""

from __future__ import annotations

import json

import pytest

from swarm.analysis.server_metrics import metrics_url, window_stats
from swarm.orchestrate.pollers import ServerPoller
from tests.helpers.sim_http import MSGS, call
from tests.helpers.support import free_port, start, swarm_cmd, wait_http

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["sglang", "tgi", "trtllm"])
def face(request, tmp_path_factory):
    name, tmp = request.param, tmp_path_factory.mktemp(request.param)
    port = free_port()
    with start(
        swarm_cmd("sim", "--server", name, "--port", str(port), "--seed", "5"), tmp / "sim.log"
    ) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout=30, proc=proc.popen, log=proc.log)
        yield name, url, tmp


def test_the_family_is_detected_and_its_counters_reconcile_with_the_client(face):
    name, url, tmp = face
    # TensorRT-LLM's Prometheus text is at /prometheus/metrics; "auto" finds the family from the names
    poller = ServerPoller(metrics_url(url, name), tmp / "server_metrics.jsonl", log=pytest.fail)
    before = poller.scrape_once()
    usages = []
    for i in range(3):
        body = {"model": "sim-model", "messages": MSGS, "max_tokens": 5 + 4 * i, "stream": True}
        body["stream_options"] = {"include_usage": True}
        r = call(url, "/v1/chat/completions", body)
        events = [json.loads(e[6:]) for e in r.raw.split(b"\n\n") if e and e != b"data: [DONE]"]
        usages.append([e["usage"] for e in events if e.get("usage")][-1])
    after = poller.scrape_once()
    assert before.source == after.source == name
    st = window_stats([before, after], 0, before.ts, after.ts)
    assert st.prompt_tokens == sum(u["prompt_tokens"] for u in usages)
    assert st.generation_tokens == sum(u["completion_tokens"] for u in usages)
    assert st.requests == 3 and after.running is not None and after.waiting is not None
    if name == "tgi":  # no TTFT histogram, no preemption or prefix-cache counter: absent, not 0
        assert "ttft" not in st.latency and st.preemptions is None and st.prefix_hit_rate is None
        assert st.latency["e2e"]["count"] == 3
    else:
        assert st.latency["ttft"]["count"] == 3 and st.latency["e2e"]["count"] == 3
    if name == "trtllm":
        assert st.preemptions is None and st.finish_reasons  # finished_reason kept
