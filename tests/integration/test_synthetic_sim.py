"""The simulator's `/tokenize` (vLLM's shapes, its pseudo-tokenizer) and `synthetic` through a real
`swarm run` (master + 2 workers) on it: every request's usage prompt tokens equal its drawn
length and the workers build their prompts before the load (uniqueness: tests/unit/load/test_synthetic.py)."""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from swarm.analysis.rundir import load_run
from swarm.client.tokenize import LlamaCppTokenizer, VllmTokenizer, open_tokenizer
from swarm.sim.protocol import TOKEN_ID_SPACE
from tests.helpers.sim_http import call, metric, scrape
from tests.helpers.support import sim_server, swarm_cmd

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Explain KV cache 简短"}]


@pytest.mark.integration
def test_sim_tokenize_counts_what_usage_will_say(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", trace=False) as s:
        chat = call(
            s.url, "/tokenize", {"model": "sim-model", "messages": MSGS, "add_generation_prompt": True}
        )
        assert chat.status == 200, chat.raw
        answer = chat.json()
        assert set(answer) == {"count", "max_model_len", "tokens", "token_strs"}
        assert answer["count"] == len(answer["tokens"]) and answer["token_strs"] is None
        body = {"model": "sim-model", "messages": MSGS, "max_tokens": 4, "stream": False}
        usage = call(s.url, "/v1/chat/completions", body).json()["usage"]
        assert usage["prompt_tokens"] == answer["count"]
        prompt = call(s.url, "/tokenize", {"prompt": "hello world", "return_token_strs": True}).json()
        assert prompt["token_strs"] == ["hell", "o", " worl", "d"] and prompt["count"] == 4
        assert call(s.url, "/tokenize", {"model": "sim-model"}).status == 400
        assert call(s.url, "/tokenize", {"model": "other", "prompt": "x"}).status == 404
        # the client's vLLM tokenizer reads it, and `auto` picks it
        assert VllmTokenizer(s.url, "sim-model").count_chat(MSGS) == answer["count"]
        assert open_tokenizer("auto", base_url=s.url, model="sim-model", dialect="vllm").name.startswith(
            "server:"
        )
        # /detokenize (vLLM's shape) gives back the text of ids its /tokenize answered; an unknown id is a 400
        tok = VllmTokenizer(s.url, "sim-model")
        ids = tok.encode("hello world 你好")
        assert tok.decode(ids) == "hello world 你好" and tok.decode(ids[1:2]) == "o"
        assert call(s.url, "/detokenize", {"model": "sim-model", "tokens": [TOKEN_ID_SPACE]}).status == 400
        assert call(s.url, "/detokenize", {"model": "sim-model", "tokens": "x"}).status == 400


@pytest.mark.integration
def test_llamacpp_sim_detokenizes_what_it_tokenized(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", "--server", "llamacpp", trace=False) as s:
        tok = LlamaCppTokenizer(s.url, "sim-model")
        ids = tok.encode("the cat sat")
        assert len(ids) == 3 and tok.decode(ids) == "the cat sat"
        bad = call(s.url, "/detokenize", {"tokens": [1.5]})
        assert bad.status == 400 and "error" in bad.json()


@pytest.mark.integration
def test_swarm_run_synthetic_on_the_sim_is_exact_and_unique(tmp_path):
    with sim_server(tmp_path, "--profile", "instant") as s:
        out = tmp_path / "run"
        cmd = swarm_cmd("run", "--host", s.url, "--workers", "2", "-u", "4", "-t", "4s", "--out", str(out),
                        "--workload", "synthetic", "--", "--input-tokens", "50-500", "--output-tokens", "12",
                        "--tokenizer", "server")  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        df = pq.read_table(out / "requests.parquet").to_pandas()
        trace = [json.loads(line) for line in s.trace.read_text().splitlines()]
        metrics = scrape(s.url)
    assert len(df) > 50 and (df.outcome == "ok").all()
    assert df.prompt_tokens.between(50, 500).all() and df.prompt_tokens.nunique() > 100
    assert (df.output_tokens == 12).all()  # ignore_eos sent by the workload itself
    for n in (0, 1):
        log = (out / f"worker-{n}.log").read_text()
        assert "synthetic prompts ready: tokenizer server:vllm:sim-model" in log, log[-1500:]
    gen = [t for t in trace if t["endpoint"] == "chat"]
    assert len(gen) == len(df)
    # no prompt shares a full 16-token block with another: the prefix cache never hits
    assert metric(metrics, "vllm:prefix_cache_queries_total") == df.prompt_tokens.sum()
    assert metric(metrics, "vllm:prefix_cache_hits_total") == 0


@pytest.mark.integration
def test_shared_prefix_hits_the_share_the_workload_implies(tmp_path):
    """1024 shared tokens of 2048 in 4 groups: the simulator's prefix cache hits 50% of prompt
    tokens (less the first request of each group), and the report prints both side by side."""
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "--workers", "2", "-u", "8", "-t", "6s", "--out", str(out), "--sim-profile", "instant",
                    "--workload", "synthetic", "--", "--input-tokens", "2048", "--output-tokens", "4",
                    "--shared-prefix-tokens", "1024", "--prefix-groups", "4")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = load_run(out)
    intended = data.summary["intended_prefix_share"]["synthetic"]
    hit = data.run_server.prefix_hit_rate
    assert intended == 0.5 and data.summary["total"]["requests"] > 200
    assert abs(hit - intended) <= 0.02, (hit, intended)
    report = (out / "report.html").read_text()
    assert f"prefix cache: server hit rate {hit:.0%} (intended shared prefix: synthetic 50%)" in report


@pytest.mark.serial
@pytest.mark.integration
def test_mixed_reports_its_two_classes_through_swarm_run(tmp_path):
    """mixed at thinking ratio 0.2: records carry the class; summary.json, the printed table and
    the report show direct and thinking beside the workload's total."""
    out = tmp_path / "run"
    cmd = swarm_cmd("run", "--workers", "2", "-u", "8", "-t", "4s", "--out", str(out), "--sim-profile", "instant",
                    "--workload", "mixed", "--", "--max-tokens", "8")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    df = pq.read_table(out / "requests.parquet").to_pandas()
    share = (df.request_class == "thinking").mean()
    assert set(df.request_class) == {"direct", "thinking"} and 0.15 < share < 0.25, share
    summary = json.loads((out / "summary.json").read_text())
    classes = summary["classes"]["mixed"]
    assert {k: b["requests"] for k, b in classes.items()} == df.request_class.value_counts().to_dict()
    assert sum(b["requests"] for b in classes.values()) == summary["mixed"]["requests"]
    for name in ("mixed/direct", "mixed/thinking"):
        assert f"\n  {name} " in p.stdout, p.stdout[-1500:]
        assert f"<td>  {name}</td>" in (out / "report.html").read_text()
