"""`swarm sim` as a process, over real HTTP: wire format, exact token counts, errors, trace, metrics."""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest

from swarm.core.tokens import count_chat_tokens, count_tokens
from swarm.sim.metrics import ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS
from tests.helpers.sim_http import (
    MSGS,
    Reply,
    call,
    chat_body,
    delta_text,
    metric,
    read_trace,
    scrape,
    token_chunks,
    urllib_open,
)
from tests.helpers.support import REPO, sim_server, swarm_cmd

pytestmark = pytest.mark.integration

TRACE_FIELDS = [
    "id",
    "arrival_time",
    "first_token_time",
    "last_token_time",
    "end_time",
    "status",
    "fault",
    "endpoint",
    "stream",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "finish_reason",
    "cached_tokens",
    "answer_tokens",
    "session",
    "user",
    "first_write_time",
    "scheduled_time",
    "tool_calls",
]


# ---- servers ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with sim_server(tmp_path_factory.mktemp("sim")) as s:
        yield s


# ---- wire format -----------------------------------------------------------------------------------
def test_chat_stream_format_and_order(sim):
    r = call(sim.url, "/v1/chat/completions", chat_body(12, continuous=True, ignore_eos=True))
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = r.chunks()
    prompt = count_chat_tokens(MSGS)
    role, tokens, usage = chunks[0], chunks[1:13], chunks[13]
    assert len(chunks) == 14
    assert role["choices"][0] == {
        "index": 0,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    }
    no_reasoning = {"reasoning_tokens": 0}  # (thinking off; vLLM with a reasoning parser says so)
    assert role["usage"] == {
        "prompt_tokens": prompt,
        "total_tokens": prompt,
        "completion_tokens": 0,
        "completion_tokens_details": no_reasoning,
    }
    for i, c in enumerate(tokens, start=1):
        assert list(c["choices"][0]["delta"]) == ["content"]
        assert c["usage"]["completion_tokens"] == i and c["usage"]["total_tokens"] == prompt + i
        assert c["choices"][0]["finish_reason"] == (None if i < 12 else "length")
    assert tokens[-1]["choices"][0]["stop_reason"] is None and "stop_reason" not in tokens[0]["choices"][0]
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": prompt,
        "total_tokens": prompt + 12,
        "completion_tokens": 12,
        "completion_tokens_details": no_reasoning,
    }
    for c in chunks:
        assert c["id"] == r.rid and c["id"].startswith("chatcmpl-")
        assert (
            c["object"] == "chat.completion.chunk"
            and c["model"] == "sim-model"
            and isinstance(c["created"], int)
        )


def test_chat_stream_without_usage_options(sim):
    r = call(sim.url, "/v1/chat/completions", chat_body(5, usage=False, ignore_eos=True))
    chunks = r.chunks()
    assert len(chunks) == 6 and all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_completions_stream_format(sim):
    body = {
        "model": "sim-model",
        "prompt": "Hello there",
        "max_tokens": 7,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    r = call(sim.url, "/v1/completions", body)
    chunks = r.chunks()
    assert len(chunks) == 8
    for i, c in enumerate(chunks[:7], start=1):
        ch = c["choices"][0]
        assert list(ch) == [
            "index",
            "text",
            "logprobs",
            "finish_reason",
            "stop_reason",
            "prompt_token_ids",
            "token_ids",
        ]  # vLLM's fields, in its order (test_vllm_conformance.py)
        assert c["object"] == "text_completion" and c["id"] == r.rid and r.rid.startswith("cmpl-")
        assert c["usage"]["completion_tokens"] == i
    assert chunks[6]["choices"][0]["finish_reason"] == "length"
    assert (
        chunks[7]["choices"] == [] and chunks[7]["usage"]["prompt_tokens"] == count_tokens("Hello there") == 4
    )


def test_non_streaming_bodies(sim):
    r = call(sim.url, "/v1/chat/completions", chat_body(9, stream=False, ignore_eos=True))
    body = r.json()
    assert r.status == 200 and body["id"] == r.rid and body["object"] == "chat.completion"
    ch = body["choices"][0]
    assert ch["message"]["role"] == "assistant" and isinstance(ch["message"]["content"], str)
    assert ch["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 9
    r = call(sim.url, "/v1/completions", {"prompt": [1, 2, 3, 4], "max_tokens": 4, "ignore_eos": True})
    body = r.json()
    assert body["object"] == "text_completion" and body["usage"]["prompt_tokens"] == 4
    assert body["usage"]["completion_tokens"] == 4 and body["choices"][0]["finish_reason"] == "length"


def test_the_clients_request_id_is_vllms_base_id_and_echoed(sim):
    """As vLLM: the request's X-Request-Id is the base of the response id (`chatcmpl-<it>`, `cmpl-<it>`)
    and comes back in x-request-id (--enable-request-id-headers); the trace line carries it."""
    for path, body, prefix in (
        ("/v1/chat/completions", chat_body(3, stream=False), "chatcmpl-"),
        ("/v1/completions", {"prompt": [1, 2], "max_tokens": 2, "stream": True}, "cmpl-"),
    ):
        sent = f"run-1-0a1b2c3d-{len(path)}"
        r = call(sim.url, path, body, headers={"X-Request-Id": sent})
        rid = r.json()["id"] if not body.get("stream") else r.chunks()[0]["id"]
        assert r.status == 200 and r.rid == sent and rid == prefix + sent
        assert read_trace(sim.trace, [sent])[sent]["status"] == 200
    bad = call(sim.url, "/v1/chat/completions", {"messages": []}, headers={"X-Request-Id": "run-1-x-9"})
    assert bad.status == 400 and bad.rid == "run-1-x-9"  # errors echo it too


def test_lengths_follow_a_distribution_with_stop_and_length(sim):
    finishes, counts = Counter(), []
    for _ in range(40):
        u = call(sim.url, "/v1/chat/completions", chat_body(120, stream=False)).json()
        finishes[u["choices"][0]["finish_reason"]] += 1
        counts.append(u["usage"]["completion_tokens"])
    assert finishes["stop"] >= 5 and finishes["length"] >= 5, finishes
    assert max(counts) == 120 and min(counts) < 100
    u = call(sim.url, "/v1/chat/completions", chat_body(400, stream=False, min_tokens=300)).json()
    assert u["usage"]["completion_tokens"] >= 300


def test_usage_equals_chunks_equals_metric_deltas(sim):
    before = scrape(sim.url)
    total_gen = total_prompt = 0
    finishes = Counter()
    for i in range(24):
        if i % 3 == 2:
            r = call(sim.url, "/v1/chat/completions", chat_body(80, stream=False))
            u = r.json()["usage"]
            finishes[r.json()["choices"][0]["finish_reason"]] += 1
        else:
            path = "/v1/chat/completions" if i % 3 == 0 else "/v1/completions"
            body = (
                chat_body(80)
                if i % 3 == 0
                else {
                    "prompt": "数" * i,
                    "max_tokens": 80,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
            )
            chunks = call(sim.url, path, body).chunks()
            u = chunks[-1]["usage"]
            assert len(token_chunks(chunks)) == u["completion_tokens"]  # one chunk per token
            finishes[token_chunks(chunks)[-1]["choices"][0]["finish_reason"]] += 1
        total_gen += u["completion_tokens"]
        total_prompt += u["prompt_tokens"]
    after = scrape(sim.url)

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("vllm:generation_tokens_total") == total_gen
    assert delta("vllm:prompt_tokens_total") == total_prompt
    for reason in ("stop", "length"):
        assert delta("vllm:request_success_total", finished_reason=reason) == finishes[reason]
    assert delta("vllm:e2e_request_latency_seconds_count") == 24
    assert delta("vllm:request_generation_tokens_sum") == total_gen
    assert delta("vllm:request_prompt_tokens_sum") == total_prompt
    assert metric(after, "vllm:num_requests_running") == 0 and metric(after, "vllm:kv_cache_usage_perc") == 0


# ---- reasoning -------------------------------------------------------------------------------------
def _reasoning_split(chunks: list[dict], field: str) -> tuple[int, int]:
    kinds = [next(iter(c["choices"][0]["delta"]), None) for c in token_chunks(chunks)]
    n_reason = kinds.count(field)
    assert kinds[:n_reason] == [field] * n_reason  # reasoning first, then the answer
    return n_reason, len(kinds) - n_reason


def test_thinking_per_request_sends_delta_reasoning(sim):
    r = call(sim.url, "/v1/chat/completions", chat_body(3000, chat_template_kwargs={"enable_thinking": True}))
    chunks = r.chunks()
    n_reason, n_content = _reasoning_split(chunks, "reasoning")
    assert 1800 <= n_reason <= 2300 and n_content >= 1
    assert chunks[-1]["usage"]["completion_tokens"] == n_reason + n_content
    assert chunks[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": n_reason}
    trace = read_trace(sim.trace, [r.rid])[r.rid]
    assert trace["reasoning_tokens"] == n_reason and trace["completion_tokens"] == n_reason + n_content
    # cut by max_tokens: all reasoning
    chunks = call(
        sim.url, "/v1/chat/completions", chat_body(50, chat_template_kwargs={"enable_thinking": True})
    ).chunks()
    assert _reasoning_split(chunks, "reasoning") == (50, 0)
    assert token_chunks(chunks)[-1]["choices"][0]["finish_reason"] == "length"
    # running usage counts reasoning as it goes; a whole body says it too
    chunks = call(
        sim.url,
        "/v1/chat/completions",
        chat_body(2100, continuous=True, ignore_eos=True, chat_template_kwargs={"enable_thinking": True}),
    ).chunks()
    n_reason, _ = _reasoning_split(chunks, "reasoning")
    running = [c["usage"]["completion_tokens_details"]["reasoning_tokens"] for c in token_chunks(chunks)]
    assert running == [min(k, n_reason) for k in range(1, 2101)]
    whole = call(
        sim.url,
        "/v1/chat/completions",
        chat_body(30, stream=False, chat_template_kwargs={"enable_thinking": True}),
    ).json()
    assert whole["usage"]["completion_tokens_details"] == {"reasoning_tokens": 30}
    plain = call(sim.url, "/v1/completions", {"prompt": "hi", "max_tokens": 3}).json()
    assert plain["usage"]["completion_tokens_details"] is None  # completions: no parser at work


def test_max_tokens_past_the_context_is_cut_to_what_is_left(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", "--max-model-len", "64") as s:
        r = call(s.url, "/v1/chat/completions", chat_body(64, ignore_eos=True))
        toks = token_chunks(r.chunks())
        prompt = count_chat_tokens(MSGS)
        assert len(toks) == 64 - prompt == r.chunks()[-1]["usage"]["completion_tokens"]
        assert toks[-1]["choices"][0]["finish_reason"] == "length"
        whole = call(s.url, "/v1/chat/completions", {"messages": MSGS, "ignore_eos": True}).json()
        assert whole["usage"]["total_tokens"] == 64  # no max_tokens: all the context leaves


def test_reasoning_content_dialect_and_server_default(tmp_path):
    with sim_server(tmp_path, "--thinking-default", "on", "--reasoning-field", "reasoning_content") as s:
        chunks = call(s.url, "/v1/chat/completions", chat_body(100)).chunks()
        assert _reasoning_split(chunks, "reasoning_content") == (100, 0)
        off = call(
            s.url, "/v1/chat/completions", chat_body(20, chat_template_kwargs={"enable_thinking": False})
        )
        assert _reasoning_split(off.chunks(), "reasoning_content")[0] == 0
        body = call(s.url, "/v1/chat/completions", chat_body(10, stream=False)).json()
        msg = body["choices"][0]["message"]
        assert len(msg["reasoning_content"]) > 0 and msg["content"] is None
        assert body["usage"]["completion_tokens_details"] is None  # (an older vLLM: no reasoning count)
        comp = call(s.url, "/v1/completions", {"prompt": "hi", "max_tokens": 5, "stream": True}).chunks()
        assert all("text" in c["choices"][0] for c in comp)  # completions never think


# ---- split UTF-8 characters ------------------------------------------------------------------------
def test_utf8_split_sends_empty_chunks_and_counts_stay_exact(tmp_path):
    with sim_server(tmp_path, "--utf8-split", "0.3") as s:
        before = scrape(s.url)
        chunks = call(
            s.url, "/v1/chat/completions", chat_body(300, continuous=True, ignore_eos=True)
        ).chunks()
        toks = token_chunks(chunks)
        assert len(toks) == 300 == chunks[-1]["usage"]["completion_tokens"]
        assert [c["usage"]["completion_tokens"] for c in toks] == list(range(1, 301))
        empty = sum(delta_text(c) == "" for c in toks)
        assert 0.2 * 300 < empty < 0.4 * 300
        after = scrape(s.url)
        assert (
            metric(after, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total")
            == 300
        )


def test_merge_reasoning_holds_back_tokens_usage_exact(tmp_path):
    with sim_server(tmp_path, "--utf8-split", "0.4", "--merge-reasoning") as s:
        body = chat_body(
            300, continuous=True, ignore_eos=True, chat_template_kwargs={"enable_thinking": True}
        )
        r = call(s.url, "/v1/chat/completions", body)
        toks = token_chunks(r.chunks())
        usage = [c["usage"]["completion_tokens"] for c in toks]
        assert len(toks) < 250 and usage[-1] == 300  # fewer chunks than tokens
        steps = [b - a for a, b in itertools.pairwise(usage)]
        assert min(steps) >= 1 and max(steps) > 1  # held-back tokens show up as jumps
        assert all(delta_text(c) != "" for c in toks[:-1])  # nothing empty is sent, but maybe the final {}
        assert all(list(c["choices"][0]["delta"]) in (["reasoning"], []) for c in toks)
        assert read_trace(s.trace, [r.rid])[r.rid]["completion_tokens"] == 300
        assert "completion_tokens_details" not in r.chunks()[-1]["usage"]  # no parser: no reasoning count


# ---- errors ----------------------------------------------------------------------------------------
def _assert_error(r: Reply, status: int, err_type: str, param: str | None, message_part: str = "") -> None:
    """An error body as vLLM writes one; `message_part` is a part of its message."""
    assert r.status == status, r.raw
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert (err["type"], err["param"], err["code"]) == (err_type, param, status)
    assert message_part in err["message"]
    assert r.headers["x-request-id"]


def test_bad_input_gets_vllm_shaped_errors(sim):
    # messages as a real vLLM 0.32 wrote them (tests/e2e/test_vllm_conformance.py asks one)
    chat = "/v1/chat/completions"
    _assert_error(
        call(sim.url, chat, b"{not json"),
        400,
        "Bad Request",
        "body.1",
        "1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.1', 'msg': 'JSON decode error', "
        "'input': '<dict of 0 items>', 'ctx': {'error': 'Expecting property name enclosed in double "
        "quotes'}}",
    )
    _assert_error(
        call(sim.url, chat, b"[1, 2]"),
        400,
        "Bad Request",
        "body",
        "'msg': 'Input should be a valid dictionary or object to extract fields from', "
        "'input': '<list of 2 items>'}",
    )
    _assert_error(
        call(sim.url, chat, {"model": "sim-model"}),
        400,
        "Bad Request",
        "body.messages",
        "{'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required', 'input': '<dict of 1 items>'}",
    )
    _assert_error(
        call(sim.url, chat, {"messages": "hi"}),
        400,
        "Bad Request",
        "body.messages",
        "{'type': 'list_type', 'loc': 'body.messages', 'msg': 'Input should be a valid list', 'input': 'hi'}",
    )
    _assert_error(
        call(sim.url, chat, {"messages": []}),
        400,
        "BadRequestError",
        None,
        "Cannot apply chat template to an empty conversation. Provide at least one message.",
    )
    # vLLM answers an unknown model with 404 NotFoundError (not 400): so does the simulator
    _assert_error(
        call(sim.url, chat, {"model": "gpt-9", "messages": MSGS}),
        404,
        "NotFoundError",
        "model",
        "The model `gpt-9` does not exist. Valid aliases: sim-model.",
    )
    _assert_error(
        call(sim.url, chat, chat_body(-5)),
        400,
        "BadRequestError",
        "max_tokens",
        "max_tokens must be at least 1, got -5. (parameter=max_tokens, value=-5)",
    )
    _assert_error(call(sim.url, chat, chat_body(0)), 400, "BadRequestError", "max_tokens")
    _assert_error(
        call(sim.url, chat, chat_body(5, min_tokens=10)),
        400,
        "BadRequestError",
        None,
        "min_tokens must be less than or equal to max_tokens=5, got 10.",
    )
    _assert_error(
        call(sim.url, chat, chat_body(10, stream=False, stream_options={"include_usage": True})),
        400,
        "BadRequestError",
        "stream_options",
        "Stream options can only be defined when `stream=True`. (parameter=stream_options)",
    )
    _assert_error(
        call(sim.url, chat, chat_body(10, temperature="hot")),
        400,
        "Bad Request",
        "body.temperature",
        "'msg': 'Input should be a valid number, unable to parse string as a number', 'input': 'hot'}",
    )
    long_prompt = [{"role": "user", "content": "字" * 33000}]
    _assert_error(
        call(sim.url, chat, {"messages": long_prompt}),
        400,
        "BadRequestError",
        "input_tokens",
        "This model's maximum context length is 32768 tokens. However, your prompt contains at least "
        "32769 input tokens, which exceeds this limit even without any output tokens. Please reduce the "
        "length of the input prompt. (parameter=input_tokens, value=32769)",
    )
    _assert_error(
        call(sim.url, chat, {"messages": MSGS, "max_tokens": 40000}),
        400,
        "BadRequestError",
        "max_tokens",
        "max_tokens=40000 cannot be greater than max_model_len=32768. Please request fewer "
        "output tokens. (parameter=max_tokens, value=40000)",
    )
    _assert_error(call(sim.url, "/v1/completions", {"max_tokens": 3}), 400, "BadRequestError", "prompt")
    for path, method, status in (("/v1/nope", "POST", 404), ("/v1/chat/completions", "GET", 405)):
        r = call(sim.url, path, method=method)
        assert r.status == status and "detail" in r.json() and r.headers["x-request-id"]
    assert call(sim.url, "/health", method="GET").status == 200


def test_models_endpoint(sim):
    r = call(sim.url, "/v1/models", method="GET")
    model = r.json()["data"][0]
    assert r.status == 200 and model["id"] == "sim-model" and model["max_model_len"] == 32768
    assert r.headers["x-request-id"]


def test_api_key(tmp_path):
    with sim_server(tmp_path, "--api-key", "sekrit") as s:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = call(s.url, "/v1/chat/completions", chat_body(3), headers=headers)
            assert r.status == 401 and r.json() == {"error": "Unauthorized"} and r.headers["x-request-id"]
        assert call(s.url, "/v1/models", method="GET").status == 401
        ok = call(s.url, "/v1/chat/completions", chat_body(3), headers={"Authorization": "Bearer sekrit"})
        assert ok.status == 200 and ok.chunks()[-1]["usage"]["completion_tokens"] <= 3
        assert call(s.url, "/health", method="GET").status == 200
        assert call(s.url, "/metrics", method="GET").status == 200
        trace = read_trace(s.trace, [r.rid, ok.rid])
        assert trace[r.rid]["status"] == 401 and trace[ok.rid]["status"] == 200


# ---- trace -----------------------------------------------------------------------------------------
def test_trace_lines_are_exact_and_prompt(sim):
    t0 = time.time()
    stream = call(sim.url, "/v1/chat/completions", chat_body(20, ignore_eos=True))
    whole = call(sim.url, "/v1/completions", {"prompt": "abc", "max_tokens": 5, "ignore_eos": True})
    bad = call(sim.url, "/v1/chat/completions", chat_body(-1))
    t1 = time.time()
    trace = read_trace(sim.trace, [stream.rid, whole.rid, bad.rid], timeout=0)  # already on disk
    s, w, b = trace[stream.rid], trace[whole.rid], trace[bad.rid]
    for rec in (s, w, b):
        assert list(rec) == TRACE_FIELDS
        assert t0 <= rec["arrival_time"] <= rec["end_time"] <= t1
    assert s["arrival_time"] <= s["first_token_time"] <= s["last_token_time"] <= s["end_time"]
    assert {k: s[k] for k in TRACE_FIELDS[5:]} == {
        "status": 200,
        "fault": None,
        "endpoint": "chat",
        "stream": True,
        "prompt_tokens": count_chat_tokens(MSGS),
        "completion_tokens": 20,
        "reasoning_tokens": 0,
        "finish_reason": "length",
        "cached_tokens": s["cached_tokens"],  # what other tests of this simulator left cached
        "answer_tokens": count_tokens(
            "".join(
                c["choices"][0]["delta"].get("content") or "" for c in stream.chunks() if c.get("choices")
            )
        ),
        "session": None,
        "user": None,  # the request's OpenAI `user` field (the trace replay names its row there)
        "first_write_time": s["first_write_time"],  # no front-end cost or delay: as the bytes went
        "scheduled_time": s["scheduled_time"],  # the engine's first step for it: its queue's end
        "tool_calls": None,  # no `tools` in the request
    }
    assert s["first_token_time"] <= s["first_write_time"] <= t1
    assert s["arrival_time"] <= s["scheduled_time"] <= s["first_token_time"]
    assert b["scheduled_time"] is None  # refused before the engine saw it
    assert 0 <= s["cached_tokens"] < s["prompt_tokens"] and s["answer_tokens"] > 0
    assert stream.chunks()[-1]["usage"]["completion_tokens"] == s["completion_tokens"]
    assert (w["endpoint"], w["stream"], w["prompt_tokens"], w["completion_tokens"]) == (
        "completions",
        False,
        1,
        5,
    )
    assert (b["status"], b["first_token_time"], b["last_token_time"], b["finish_reason"]) == (
        400,
        None,
        None,
        None,
    )


# ---- /metrics --------------------------------------------------------------------------------------
CONTRACT_METRICS = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:request_time_per_output_token_seconds_bucket",
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:request_queue_time_seconds_bucket",
    "vllm:request_prefill_time_seconds_bucket",
    "vllm:request_decode_time_seconds_bucket",
    "vllm:request_prompt_tokens_bucket",
    "vllm:request_generation_tokens_bucket",
    "vllm:iteration_tokens_total_bucket",
]


def test_metrics_names_labels_buckets_and_promtool(sim):
    call(sim.url, "/v1/chat/completions", chat_body(30, ignore_eos=True))
    samples = scrape(sim.url)
    for name in CONTRACT_METRICS:
        assert any(
            n == name and dict(lb).get("model_name") == "sim-model" and dict(lb).get("engine") == "0"
            for n, lb in samples
        ), name

    def les(name):
        return [dict(lb)["le"] for n, lb in samples if n == name]

    assert les("vllm:time_to_first_token_seconds_bucket") == [str(float(b)) for b in TTFT_BUCKETS] + ["+Inf"]
    assert les("vllm:inter_token_latency_seconds_bucket") == [str(float(b)) for b in ITL_BUCKETS] + ["+Inf"]
    for name in ("vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket"):
        assert les(name) == [str(float(b)) for b in REQUEST_LATENCY_BUCKETS] + ["+Inf"]
    assert TTFT_BUCKETS[:3] == (0.001, 0.005, 0.01) and REQUEST_LATENCY_BUCKETS[-1] == 7680.0
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (run scripts/install-system-deps.sh)")
    with urllib_open(sim.url + "/metrics") as text:
        res = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    # The exposition parses (exit 1 otherwise); promtool 2.42's linter (exit 3) then flags only what
    # vLLM's own names do: the ':' in every vllm: name and the "_total" of the iteration-tokens histogram.
    problems = [p for p in (res.stdout + res.stderr).splitlines() if p.strip()]
    inherent = [
        p
        for p in problems
        if p.endswith("metric names should not contain ':'")
        or p == 'vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix'
    ]
    assert res.returncode in (0, 3) and problems == inherent, res.stdout + res.stderr
    assert len(inherent) == text.count("# TYPE ") + 1  # one per family, plus the histogram's _total


# ---- engine behaviour seen from outside ------------------------------------------------------------
FAST_PROFILE = """# a user's own profile: 1 ms steps, so concurrent streams really overlap
[engine]
max_num_seqs = 8
[step]
base_s = 0.001
"""


def test_prefix_cache_hits_and_preemption_over_http(tmp_path):
    profile = tmp_path / "fast.toml"
    profile.write_text(FAST_PROFILE)
    args = ("--profile", str(profile), "--kv-cache-tokens", "2048", "--max-model-len", "1024")
    with sim_server(tmp_path, *args) as s:
        prompt = [{"role": "user", "content": "长" * 500}]
        call(s.url, "/v1/chat/completions", {"messages": prompt, "max_tokens": 4})
        before = scrape(s.url)
        call(s.url, "/v1/chat/completions", {"messages": prompt, "max_tokens": 4})
        after = scrape(s.url)
        hits = metric(after, "vllm:prefix_cache_hits_total") - metric(before, "vllm:prefix_cache_hits_total")
        assert hits == (count_chat_tokens(prompt) - 1) // 16 * 16
        assert metric(after, "vllm:prefix_cache_queries_total") - metric(
            before, "vllm:prefix_cache_queries_total"
        ) == count_chat_tokens(prompt)

        body = {
            "messages": MSGS,
            "max_tokens": 600,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda _: call(s.url, "/v1/chat/completions", body), range(6)))
        for r in replies:
            chunks = r.chunks()
            assert len(token_chunks(chunks)) == 600 == chunks[-1]["usage"]["completion_tokens"]
        final = scrape(s.url)
        assert metric(final, "vllm:num_preemptions_total") > 0
        assert (
            metric(final, "vllm:kv_cache_usage_perc") == 0 and metric(final, "vllm:num_requests_running") == 0
        )
        assert (
            metric(final, "vllm:generation_tokens_total") - metric(after, "vllm:generation_tokens_total")
            == 3600
        )


def test_client_disconnect_frees_the_sequence_and_sigterm_flushes(tmp_path):
    with sim_server(tmp_path, "--profile", "rtx5090x4-qwen3.6-27b") as s:
        u = urlparse(s.url)
        sock = socket.create_connection((u.hostname, u.port))
        body = json.dumps(chat_body(500, ignore_eos=True)).encode()
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        head = sock.recv(65536)
        rid = next(
            line.split(b": ")[1].decode()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"x-request-id")
        )
        time.sleep(0.3)
        assert metric(scrape(s.url), "vllm:num_requests_running") == 1
        sock.close()
        deadline = time.monotonic() + 5
        while metric(scrape(s.url), "vllm:num_requests_running") != 0:
            assert time.monotonic() < deadline, "the abandoned sequence is still running"
            time.sleep(0.05)
        samples = scrape(s.url)
        assert metric(samples, "vllm:kv_cache_usage_perc") == 0
        assert read_trace(s.trace, [rid])[rid]["finish_reason"] == "abort"

        # a stream still in flight when SIGTERM comes: the server exits cleanly, its trace line is written
        holder: dict = {}
        t = threading.Thread(
            target=lambda: holder.update(r=call(s.url, "/v1/chat/completions", chat_body(2000)))
        )
        t.start()
        time.sleep(0.5)
        s.proc.signal(signal.SIGTERM)
        assert s.proc.wait(timeout=10) == 0
        t.join(timeout=10)
        lines = [json.loads(x) for x in s.trace.read_text().splitlines()]
        assert lines[-1]["finish_reason"] == "abort" and lines[-1]["completion_tokens"] > 0
        assert "Traceback" not in s.proc.output()


# ---- CLI -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "nope=0.1"], "--fault"),
        (["--fault", "cut=0.7", "--fault", "stall=0.7"], "add up"),
        (["--utf8-split", "1.5"], "--utf8-split"),
        (["--profile", "no-such"], "unknown profile"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--kv-cache-tokens", "100"], "kv_cache_tokens"),
    ],
)
def test_bad_cli_input_is_one_line_exit_2(args, message):
    res = subprocess.run(
        swarm_cmd("sim", "--port", "0", *args), capture_output=True, text=True, cwd=REPO, timeout=30
    )
    assert res.returncode == 2, res.stderr
    assert (
        message in res.stderr and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    )


def test_port_in_use_is_a_usage_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run(
            swarm_cmd("sim", "--port", str(port)), capture_output=True, text=True, cwd=REPO, timeout=30
        )
    assert res.returncode == 2 and "cannot listen" in res.stderr and "Traceback" not in res.stderr
