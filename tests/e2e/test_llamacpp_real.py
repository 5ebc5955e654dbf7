"""The swarm against a real llama.cpp `llama-server`, reconciled with its own /metrics.

`llamacpp_target` (tests/helpers/llamacpp_fixture.py): llama-server built here from llama.cpp's
source (scripts/llama-server-build.sh), serving the tiny Qwen2 model as GGUF
(scripts/make_tiny_gguf.py: random weights, the project's tiny tokenizer and chat template) on
loopback with 2 slots, started once per session. What the server sent is printed in the
"real llama.cpp reconciliation" section of pytest's summary.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from swarm.analysis.server_metrics import read_snapshots
from swarm.analysis.server_parse import parse_metrics
from swarm.client.dialects import DIALECTS
from tests.e2e.test_vllm_conformance import ask
from tests.e2e.test_vllm_real import MAX_TOKENS, swarm_run
from tests.helpers.support import REPO

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

MSGS = [{"role": "user", "content": "用一句话介绍北京"}]
# llama-server (b11434) closes the connection after every streamed response while its headers say
# `Keep-Alive: timeout=5, max=100` (test_streamed_response_closes_the_connection). A request sent on
# that pooled connection gets no byte back; the swarm's transport then sends it once more on a new
# connection (swarm/client/transport.py `_Stale`, as Chromium does for a reused socket), so every
# record must be ok.
LOCUST = ("--max-tokens", str(MAX_TOKENS))
SWEEP_TOKENS = 256


def stale_connection_failures(df) -> int:
    """Records that failed (none may: the stale kept-alive connection is retried on a new one). A request
    the run's own stop cut while it was in flight (`cancelled`, its reason saying so) is not a failure:
    a slow machine leaves one in flight at the end of a sweep's last stage."""
    cut = (df.outcome == "cancelled") & df.error.fillna("").str.startswith("cut by the swarm's stop")
    bad = df[(df.outcome != "ok") & ~cut]
    assert bad.empty, bad[["outcome", "error", "http_status"]].head()
    return len(bad)


def post(url: str, path: str, body: bytes | dict) -> tuple[int, bytes]:
    a = ask(url, path, body)
    return a.status, a.body


def stream(url: str, path: str, body: bytes) -> list[dict]:
    status, raw = post(url, path, body)
    assert status == 200, raw[:500]
    text = raw.decode()
    assert text.rstrip().endswith("data: [DONE]"), text[-300:]
    return [
        json.loads(block[6:])
        for block in text.split("\n\n")
        if block.startswith("data: ") and block != "data: [DONE]"
    ]


def swarm_body(target, endpoint: str, thinking: bool | None, max_tokens: int = MAX_TOKENS) -> bytes:
    """Exactly the body the swarm's llamacpp dialect sends."""
    return DIALECTS["llamacpp"].body(
        endpoint=endpoint,
        model=target.model,
        messages=MSGS if endpoint == "chat" else None,
        prompt=None if endpoint == "chat" else "Explain prefix caching in one paragraph.",
        max_tokens=max_tokens,
        thinking=thinking,
        ignore_eos=True,
    )


def test_gguf_generator_is_deterministic(llamacpp_target, tmp_path):
    """scripts/make_tiny_gguf.py writes the served model again byte for byte."""
    from swarm.orchestrate.llamacpp import ensure_tiny_gguf

    build = llamacpp_target.build
    served = ensure_tiny_gguf(build)  # (the file the fixture serves: made already, named by its inputs)
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_tiny_gguf.py"),
            str(tmp_path / "again.gguf"),
            "--gguf-py",
            str(build.src / "gguf-py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "again.gguf").read_bytes() == served.read_bytes()


@pytest.mark.parametrize(("endpoint", "thinking"), [("chat", False), ("chat", True), ("completions", None)])
def test_stream_has_llamacpps_usage_and_timings(llamacpp_target, llamacpp_report, endpoint, thinking):
    """The last chunk carries usage and llama.cpp's timings; they agree with each other and the tokens."""
    path = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}[endpoint]
    # the swarm's body, sampled greedily: the random model's answer is then the same every run (with
    # llama-server's random seed it closed its think block now and then, and content was not empty)
    body = {**json.loads(swarm_body(llamacpp_target, endpoint, thinking)), "temperature": 0.0}
    chunks = stream(llamacpp_target.url, path, json.dumps(body).encode())
    last = chunks[-1]
    usage, timings = last["usage"], last["timings"]
    assert set(timings) >= {
        "cache_n",
        "prompt_n",
        "prompt_ms",
        "prompt_per_second",
        "predicted_n",
        "predicted_ms",
        "predicted_per_second",
    }, timings
    assert usage["completion_tokens"] == timings["predicted_n"] == MAX_TOKENS  # ignore_eos
    assert usage["prompt_tokens"] == timings["prompt_n"] + timings["cache_n"], (usage, timings)
    assert usage["prompt_tokens_details"]["cached_tokens"] == timings["cache_n"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if endpoint == "chat":
        deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        content = "".join(d.get("content") or "" for d in deltas)
        if thinking is False:
            assert reasoning == "" and content, deltas[:3]
        else:  # the GGUF's template opens a think block the random model never closes: all reasoning
            assert reasoning and content == "", deltas[:3]
        llamacpp_report.add(
            f"chat stream, thinking {'on' if thinking else 'off'}: {len(chunks)} events, reasoning_content "
            f"{len(reasoning)} chars, content {len(content)} chars; last event keys {sorted(last)}, usage "
            f"{usage}, timings {timings}"
        )
    else:
        text = "".join(c["choices"][0].get("text") or "" for c in chunks if c.get("choices"))
        assert text
        llamacpp_report.add(
            f"completions stream: {len(chunks)} events, last event keys {sorted(last)}, usage {usage}, "
            f"timings {timings}"
        )


def test_errors_carry_the_servers_message(llamacpp_target, llamacpp_report):
    """Bad JSON and a prompt past a slot's context: llama.cpp's error object, recorded as sent."""
    url = llamacpp_target.url
    status, raw = post(url, "/v1/chat/completions", b"{not json")
    bad_json = json.loads(raw)
    assert status in (400, 500) and set(bad_json["error"]) >= {"code", "message", "type"}, raw[:300]
    llamacpp_report.add(f"error, malformed JSON: {status} {raw.decode()[:300]}")

    long = {
        "model": llamacpp_target.model,
        "messages": [{"role": "user", "content": "hello " * llamacpp_target.ctx_per_slot}],
        "max_tokens": 8,
    }
    status, raw = post(url, "/v1/chat/completions", long)
    err = json.loads(raw)["error"]
    assert status == 400 and err["type"] == "exceed_context_size_error", raw[:500]
    assert err["n_ctx"] == llamacpp_target.ctx_per_slot and err["n_prompt_tokens"] > err["n_ctx"], err
    llamacpp_report.add(f"error, prompt past the slot's context: {status} {raw.decode()[:400]}")

    status, raw = post(
        url, "/v1/chat/completions", {"model": "no-such-model", "messages": MSGS, "max_tokens": 2}
    )
    llamacpp_report.add(f"unknown model (one model served): {status} {raw.decode()[:160]}")


def test_tokenize_and_apply_template_shapes(llamacpp_target, llamacpp_report):
    """/apply-template renders the chat prompt; /tokenize of it counts what usage.prompt_tokens counts."""
    url = llamacpp_target.url
    body = {"messages": MSGS, "chat_template_kwargs": {"enable_thinking": False}}
    status, raw = post(url, "/apply-template", body)
    assert status == 200, raw[:300]
    prompt = json.loads(raw)["prompt"]
    assert prompt.startswith("<|im_start|>user\n") and prompt.endswith("<think>\n\n</think>\n\n"), prompt
    llamacpp_report.add(f"/apply-template {json.dumps(body, ensure_ascii=False)} -> {raw.decode()[:300]}")
    tok_body = {"content": prompt, "add_special": False, "parse_special": True, "with_pieces": False}
    status, raw = post(url, "/tokenize", tok_body)
    assert status == 200, raw[:300]
    tokens = json.loads(raw)["tokens"]
    assert tokens and all(isinstance(t, int) for t in tokens)
    llamacpp_report.add(
        f"/tokenize {json.dumps(tok_body, ensure_ascii=False)[:120]}... -> {raw.decode()[:200]}"
    )
    status, raw = post(url, "/tokenize", {"content": "hello 北京", "with_pieces": True})
    assert status == 200 and all(set(t) == {"id", "piece"} for t in json.loads(raw)["tokens"]), raw[:300]
    llamacpp_report.add(f'/tokenize {{"content": "hello 北京", "with_pieces": true}} -> {raw.decode()[:300]}')
    chunks = stream(url, "/v1/chat/completions", swarm_body(llamacpp_target, "chat", False, max_tokens=4))
    assert chunks[-1]["usage"]["prompt_tokens"] == len(tokens)


def test_swarm_totals_equal_llamacpp_counters(llamacpp_target, llamacpp_report, tmp_path):
    """One `swarm run` (2 workers, mixed workload): totals equal the /metrics counter deltas exactly."""
    raw_before = parse_metrics(llamacpp_target.get("/metrics").decode())
    run = swarm_run(
        llamacpp_target,
        tmp_path / "run",
        "--workload",
        "mixed",
        "-u",
        "2",
        "-t",
        "8s",
        locust=LOCUST,
    )
    total, df = run.summary["total"], run.records
    n = total["requests"]
    stale = stale_connection_failures(df)
    ok = df[df.outcome == "ok"]
    assert len(ok) > 0 and len(df) == n
    assert ok.tokens_from_usage.all()
    assert (ok.output_tokens == MAX_TOKENS).all()
    assert total["output_tokens"] == run.delta("generation_tokens") == ok.output_tokens.sum()
    assert total["prompt_tokens"] == run.delta("prompt_tokens") == ok.prompt_tokens.sum()
    raw_after = parse_metrics(llamacpp_target.get("/metrics").decode())
    cached = run.delta("prefix_hits")
    llamacpp_report.add(
        f"mixed, 2 users x 8 s: requests swarm {n}, {len(ok)} ok, {stale} on a connection the server had "
        f"closed (llama.cpp exposes no request counter); prompt tokens "
        f"swarm {total['prompt_tokens']} / llamacpp:prompt_tokens_total "
        f"{run.delta('prompt_tokens') - cached:.0f} + prompt_tokens_cached_total {cached:.0f}; output tokens "
        f"swarm {total['output_tokens']} / llamacpp:tokens_predicted_total {run.delta('generation_tokens'):.0f}"
    )
    assert raw_after.source == raw_before.source == "llamacpp"
    # provenance (issue 39): the build, model and context as llama-server's own /props says them
    props = json.loads(llamacpp_target.get("/props"))
    (said,) = run.summary["provenance"]["targets"].values()
    n_ctx = props["default_generation_settings"]["n_ctx"]
    assert said["family"] == "llamacpp" and said["version"] == props["build_info"], said
    assert said["max_model_len"] == n_ctx and said["launch_flags"]["total_slots"] == props["total_slots"], (
        said
    )
    html = (run.out / "report.html").read_text()
    assert f"llamacpp {props['build_info']}" in html and f"max_model_len {n_ctx}" in html
    llamacpp_report.add(
        f"provenance: llamacpp {props['build_info']}, n_ctx {n_ctx}, slots {props['total_slots']}"
    )


def test_sweep_past_the_slots_pins_processing_and_defers(llamacpp_target, llamacpp_report, tmp_path):
    """Sweep 1,2,6 users over 2 slots: requests_processing pinned at 2, requests_deferred grows, and the
    diagnosis names the --parallel slot count. Answers of SWEEP_TOKENS keep a slot busy for a good part
    of a second (32 tokens last ~20 ms here: scrapes would catch slots between two requests)."""
    from swarm.analysis.report import stage_table
    from swarm.analysis.rundir import load_run

    slots = llamacpp_target.max_num_seqs
    out = tmp_path / "sweep"
    run = swarm_run(
        llamacpp_target,
        out,
        "--workload",
        "short_qa",
        "--sweep",
        "1,2,6",
        "--stage-time",
        "8s",
        locust=("--max-tokens", str(SWEEP_TOKENS), *LOCUST[2:]),
    )
    stale = stale_connection_failures(run.records)
    assert run.summary["total"]["output_tokens"] == run.delta("generation_tokens")
    snaps = read_snapshots(out / "server_metrics.jsonl")
    assert snaps and all(s.source == "llamacpp" for s in snaps)
    table = stage_table(load_run(out))
    assert list(table.users) == [1, 2, 6]
    assert table.srv_running_max.max() == slots and (table.srv_running_max <= slots).all()
    assert table.srv_running_max.iloc[-1] == slots
    assert (
        table.srv_waiting_max.iloc[-1] > table.srv_waiting_max.iloc[1] and table.srv_waiting_mean.iloc[-1] > 0
    )
    assert table.srv_waiting_max.iloc[0] == 0
    findings = json.loads((out / "diagnosis.json").read_text())
    cap = [f for f in findings if f["kind"] == "max_num_seqs_cap"]
    assert cap and "--parallel slot count" in cap[0]["text"], findings
    html = (out / "report.html").read_text()
    assert "Client vs server" in html
    llamacpp_report.add(
        f"sweep 1,2,6 x 8 s ({SWEEP_TOKENS} tokens each) over {slots} slots: requests_processing max {table.srv_running_max.tolist()}, "
        f"requests_deferred max {table.srv_waiting_max.tolist()} mean "
        f"{[round(v, 2) for v in table.srv_waiting_mean]}; {stale} of {len(run.records)} requests on a closed "
        f"connection; diagnosis: {cap[0]['text']}"
    )


def test_streamed_response_closes_the_connection(llamacpp_target, llamacpp_report):
    """What the swarm meets: after a streamed answer llama-server closes the keep-alive connection.

    If a llama.cpp release fixes this, this test fails: then the transport's retry of a stale
    kept-alive connection has nothing left to do for llama.cpp (keep it: proxies do this too)."""
    import http.client
    from urllib.parse import urlparse

    u = urlparse(llamacpp_target.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        conn.request("POST", "/v1/chat/completions", swarm_body(llamacpp_target, "chat", False), headers)
        r = conn.getresponse()
        r.read()
        keep_alive = r.getheader("Keep-Alive")
        try:
            conn.request("POST", "/v1/chat/completions", swarm_body(llamacpp_target, "chat", False), headers)
            conn.getresponse().read()
            second = "answered"
        except (http.client.RemoteDisconnected, ConnectionError) as e:
            second = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    llamacpp_report.add(
        f"keep-alive: the first streamed answer says Keep-Alive {keep_alive!r}; a second request on the "
        f"same connection: {second}"
    )
    assert keep_alive and second != "answered"


def test_synthetic_prompts_have_exact_lengths_by_llamacpps_own_count(
    llamacpp_target, llamacpp_report, tmp_path
):
    """`--tokenizer server` on llama.cpp (/apply-template + /tokenize): every prompt is exactly as
    long as the server's usage says, and every answer exactly --output-tokens."""
    run = swarm_run(
        llamacpp_target,
        tmp_path / "run",
        "--workload",
        "synthetic",
        "-u",
        "2",
        "-t",
        "8s",  # (each worker counts its prompts with the server before the load starts: 0.2 s; 20 s gave 2,147 requests)
        locust=("--tokenizer", "server", "--input-tokens", "40-120", "--output-tokens", "16"),
    )
    df = run.records
    stale_connection_failures(df)
    assert len(df) > 0 and df.tokens_from_usage.all()
    assert df.prompt_tokens.between(40, 120).all(), df.prompt_tokens.describe()
    assert (df.output_tokens == 16).all()
    assert df.prompt_tokens.nunique() > 5  # the range is drawn, not one length
    assert run.summary["total"]["prompt_tokens"] == run.delta("prompt_tokens") == df.prompt_tokens.sum()
    llamacpp_report.add(
        f"synthetic 40-120 in / 16 out, --tokenizer server: {len(df)} requests, prompt tokens by usage "
        f"{df.prompt_tokens.min()}-{df.prompt_tokens.max()} ({df.prompt_tokens.nunique()} lengths), all in range"
    )


def test_processed_prompt_tokens_equal_llamacpps_counter(llamacpp_target, llamacpp_report, tmp_path):
    """rag (its prompts share a passage prefix, which llama.cpp's slot prompt cache serves): each
    response's usage says its cached tokens, and the client's prompt tokens less them equal the
    increase of llamacpp:prompt_tokens_total (it counts only the prompt tokens it processed), the
    cached ones that of prompt_tokens_cached_total. Exact while the counters are under 10^6:
    llama-server prints them with 6 significant digits (server_metrics.printed_error)."""
    from swarm.analysis.server_metrics import printed_error

    out = tmp_path / "run"
    run = swarm_run(
        llamacpp_target,
        out,
        "--workload",
        "rag",
        "-u",
        "2",
        "-t",
        "8s",
        locust=(*LOCUST, "--rag-tokens", "600-900"),  # a slot holds 2048 tokens
    )
    df = run.records
    stale = stale_connection_failures(df)
    assert len(df) > 4 and df.cached_tokens.notna().all(), df[["prompt_tokens", "cached_tokens"]].head()
    processed = int((df.prompt_tokens - df.cached_tokens).sum())
    cached = int(df.cached_tokens.sum())
    srv_cached = run.delta("prefix_hits")
    srv_processed = run.delta("prompt_tokens") - srv_cached
    raw = [s.prompt_tokens - s.prefix_hits for s in (run.before, run.after)]
    slack = sum(printed_error(v) for v in raw)
    findings = [f["text"] for f in json.loads((out / "diagnosis.json").read_text())]
    llamacpp_report.add(
        f"rag 600-900 tokens, 2 users x 8 s: {len(df)} requests ({stale} retried), prompt tokens {df.prompt_tokens.sum()}"
        f" of which cached {cached} by the responses' cached_tokens; client processed {processed} vs "
        f"llamacpp:prompt_tokens_total +{srv_processed:.0f} (counter at {raw[1]:.0f}, printing error <= "
        f"{slack:.0f}); cached vs prompt_tokens_cached_total +{srv_cached:.0f}; share "
        f"{summary_share(run.summary)}; diagnosis: {[t for t in findings if 'prompt tokens' in t.lower()]}"
    )
    assert cached > 0  # the shared passage prefix was served from the prompt cache
    if slack == 0:
        assert processed == srv_processed and cached == srv_cached
        assert any(t.startswith("Processed prompt tokens reconcile exactly") for t in findings), findings
    else:
        assert abs(processed - srv_processed) <= slack and abs(cached - srv_cached) <= slack
        assert any(t.startswith("Processed prompt tokens reconcile") for t in findings), findings
    rag = run.summary["rag"]["prompt_cache"]
    assert (rag["requests"], rag["cached_tokens"]) == (len(df), cached)


def summary_share(summary: dict) -> str:
    cache = (summary.get("total") or {}).get("prompt_cache") or {}
    share = cache.get("hit_share")
    return "-" if share is None else f"{share:.1%}"
