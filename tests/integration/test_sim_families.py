"""`swarm sim --server sglang|tgi|trtllm|ollama` over real HTTP: each face names itself in
/v1/models as the client detects it, streams its usage where its source puts it, and its own
/metrics counters equal the usage the responses carried (Ollama: no /metrics; the trace is the
ground truth). The shapes themselves are checked against the sources in tests/unit/sim."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.sim_http import MSGS, call, read_trace
from tests.helpers.support import free_port, start, swarm_cmd, wait_http

pytestmark = pytest.mark.integration

OWNED_BY = {"sglang": "sglang", "tgi": "sim-model", "trtllm": "tensorrt_llm", "ollama": "library"}
METRICS_PATH = {"sglang": "/metrics", "tgi": "/metrics", "trtllm": "/prometheus/metrics"}
HEALTH = {"sglang": "/health", "tgi": "/health", "trtllm": "/health", "ollama": "/"}


@pytest.fixture(scope="module", params=["sglang", "tgi", "trtllm", "ollama"])
def face(request, tmp_path_factory):
    name, tmp = request.param, tmp_path_factory.mktemp(request.param)
    port, trace = free_port(), tmp / "trace.jsonl"
    cmd = swarm_cmd("sim", "--server", name, "--port", str(port), "--trace", str(trace), "--seed", "3")
    with start(cmd, tmp / "sim.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + HEALTH[name], timeout=30, proc=proc.popen, log=proc.log)
        yield name, url, trace


def _usage(raw: bytes) -> dict:
    """The usage a stream carried: its last event with a usage object."""
    events = [json.loads(e[6:]) for e in raw.split(b"\n\n") if e and e != b"data: [DONE]"]
    return [e["usage"] for e in events if e.get("usage")][-1]


def _scrape(url: str, path: str) -> dict[str, float]:
    """The unlabelled-by-bucket samples by name; samples split by `finished_reason` summed."""
    r = call(url, path, method="GET")
    assert r.status == 200
    out: dict[str, float] = {}
    for f in text_string_to_metric_families(r.raw.decode()):
        for s in f.samples:
            if "le" not in s.labels:
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_the_face_names_itself_streams_usage_and_counts_what_it_sent(face):
    name, url, trace = face
    models = call(url, "/v1/models", method="GET").json()
    assert models["data"][0]["owned_by"] == OWNED_BY[name]
    usages, ids = [], []
    for i in range(4):
        body = {"model": "sim-model", "messages": MSGS, "max_tokens": 8 + 5 * i, "stream": True}
        body["stream_options"] = {"include_usage": True}
        r = call(url, "/v1/chat/completions", body)
        assert r.status == 200 and r.raw.endswith(b"data: [DONE]\n\n")
        usages.append(_usage(r.raw))
        ids.append(r.rid)
    r = call(
        url,
        "/v1/completions",
        {
            "model": "sim-model",
            "prompt": "天气 today",
            "max_tokens": 6,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    usages.append(_usage(r.raw))
    ids.append(r.rid)
    prompt = sum(u["prompt_tokens"] for u in usages)
    completion = sum(u["completion_tokens"] for u in usages)
    truth = read_trace(trace, ids)
    assert prompt == sum(truth[i]["prompt_tokens"] for i in ids)
    assert completion == sum(truth[i]["completion_tokens"] for i in ids)
    if name == "ollama":  # no Prometheus code at all: the 404 of any unknown path
        r = call(url, "/metrics", method="GET")
        assert (r.status, r.raw) == (404, b"404 page not found")
        return
    m = _scrape(url, METRICS_PATH[name])
    if name == "sglang":
        assert (m["sglang:prompt_tokens_total"], m["sglang:generation_tokens_total"]) == (prompt, completion)
        assert m["sglang:num_requests_total"] == 5 == m["sglang:time_to_first_token_seconds_count"]
        assert m["sglang:inter_token_latency_seconds_count"] == completion - 5  # every token after the first
    elif name == "tgi":
        assert (m["tgi_request_input_length_sum"], m["tgi_request_generated_tokens_sum"]) == (
            prompt,
            completion,
        )
        assert m["tgi_request_count_total"] == m["tgi_request_success_total"] == 5
        assert not any(k.startswith("tgi_") and "first_token" in k for k in m)  # TGI has no TTFT histogram
    else:
        assert (m["trtllm_prompt_tokens_total"], m["trtllm_generation_tokens_total"]) == (prompt, completion)
        assert m["trtllm_request_success_total"] == 5 == m["trtllm_time_to_first_token_seconds_count"]
        r = call(url, "/metrics", method="GET")  # trtllm-serve's /metrics: JSON iteration stats
        assert r.status == 200 and isinstance(r.json(), list)
