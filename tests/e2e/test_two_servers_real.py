"""One `swarm run` against two real servers at once (issue 29, several endpoints): vLLM's CPU build
and llama-server, both on the tiny model (tests/e2e/conftest.py's session fixtures), two engines
with two dialects. No --model: each endpoint is sent the model its own /v1/models lists and read
in the dialect its own listing names (vllm, llamacpp); the run says when the models differ (both
fixtures name the tiny model tiny-qwen2, a SWARM_TARGET_URL vLLM another). Per endpoint the records reconcile exactly with that server's
own counters: vLLM's request, prompt and generation counters; llama.cpp's prompt and predicted
token counters (it has no request counter).
"""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from tests.e2e.test_vllm_real import MAX_TOKENS
from tests.helpers.support import REPO, swarm_cmd

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_one_run_over_vllm_and_llamacpp_reconciles_per_endpoint(
    vllm_target, llamacpp_target, vllm_report, tmp_path
):
    out = tmp_path / "run"
    vb, lb = vllm_target.settled(), llamacpp_target.settled()
    cmd = swarm_cmd("run", "--host", f"{vllm_target.url},{llamacpp_target.url}", "--workers", "1",
                    "-u", "4", "-t", "8s", "--workload", "short_qa", "--out", str(out),
                    "--", "--ignore-eos", "--max-tokens", str(MAX_TOKENS))  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    va, la = vllm_target.settled(), llamacpp_target.settled()
    differ = vllm_target.model != llamacpp_target.model
    assert ("the endpoints serve different models" in p.stdout) == differ, p.stdout[-2000:]
    df = pq.read_table(out / "requests.parquet").to_pandas()
    summary = json.loads((out / "summary.json").read_text())
    assert (df.outcome == "ok").all(), df[df.outcome != "ok"][["endpoint", "outcome", "error"]].head()
    assert df.request_id.is_unique and df.tokens_from_usage.all() and (df.output_tokens == MAX_TOKENS).all()
    v, ll = df[df.endpoint == vllm_target.url], df[df.endpoint == llamacpp_target.url]
    assert len(v) + len(ll) == len(df) == summary["total"]["requests"] and len(v) and len(ll)
    assert set(v.model) == {vllm_target.model} and set(ll.model) == {llamacpp_target.model}
    # vLLM: every request it finished is one record, tokens exact
    finished = {r: n - vb.request_success.get(r, 0.0) for r, n in va.request_success.items()}
    assert {r: n for r, n in finished.items() if n} == {"length": len(v)}
    assert v.prompt_tokens.sum() == va.prompt_tokens - vb.prompt_tokens
    assert v.output_tokens.sum() == va.generation_tokens - vb.generation_tokens
    # llama.cpp: tokens exact (prompt tokens: its processed + cached counters, as parse_metrics sums them)
    assert ll.prompt_tokens.sum() == la.prompt_tokens - lb.prompt_tokens
    assert ll.output_tokens.sum() == la.generation_tokens - lb.generation_tokens
    per = summary["endpoints"]
    assert per[vllm_target.url]["requests"] == len(v) and per[llamacpp_target.url]["requests"] == len(ll)
    # each endpoint scraped in its own family
    scrapes = {
        e["label"]: e["server_metrics"] for e in json.loads((out / "endpoints.json").read_text())["endpoints"]
    }
    for url, family in ((vllm_target.url, "vllm"), (llamacpp_target.url, "llamacpp")):
        first = json.loads((out / scrapes[url]).read_text().splitlines()[0])
        assert first["source"] == family
    vllm_report.add(
        f"two servers at once: vLLM {len(v)} requests ({finished.get('length', 0):.0f} finished by its counter), "
        f"llama.cpp {len(ll)} requests, tokens equal to each server's counters"
    )
