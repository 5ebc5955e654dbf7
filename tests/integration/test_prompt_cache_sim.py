"""Cached prompt tokens through a real `swarm run` (master + 2 workers) on the simulator, reconciled
with its counters exactly: its llama.cpp face (cached_tokens always; processed prompt tokens ==
llamacpp:prompt_tokens_total) and its vLLM face with --enable-prompt-tokens-details (cached tokens
== vllm:prefix_cache_hits_total), and without the flag (nothing said: absent, not zero)."""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from tests.helpers.sim_http import scrape
from tests.helpers.support import sim_server, swarm_cmd

pytestmark = pytest.mark.integration
BLOCK = 16  # the instant profile's KV block size


def counter(samples: dict, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def run_rag(url: str, out, stage_time: str = "3s"):
    """Two open-loop stages of rag and short_qa. Few enough prompt tokens (~300k) that llama.cpp's
    counters stay under 1,000,000, which it prints exactly (6 significant digits: above, the
    diagnosis allows for the printing; tests/unit/analysis/test_diagnosis_prompt_cache.py)."""
    cmd = swarm_cmd("run", "--host", url, "--workers", "2", "-u", "8", "--rate", "30,60", "--stage-time",
                    stage_time, "--out", str(out), "--workload", "rag,short_qa", "--",
                    "--max-tokens", "8")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    df = pq.read_table(out / "requests.parquet").to_pandas()
    summary = json.loads((out / "summary.json").read_text())
    findings = [f["text"] for f in json.loads((out / "diagnosis.json").read_text())]
    assert len(df) > 100 and (df.outcome == "ok").all(), df.outcome.value_counts()
    return p.stdout, df, summary, findings


def test_llamacpp_face_processed_prompt_tokens_equal_its_counter(tmp_path):
    with sim_server(tmp_path, "--server", "llamacpp", "--profile", "instant", trace=False) as s:
        stdout, df, summary, findings = run_rag(s.url, tmp_path / "run")
        metrics = scrape(s.url)
    assert df.cached_tokens.notna().all()  # llama.cpp always says
    processed = int((df.prompt_tokens - df.cached_tokens).sum())
    assert processed == counter(metrics, "llamacpp:prompt_tokens_total") < 1_000_000
    assert int(df.cached_tokens.sum()) == counter(metrics, "llamacpp:prompt_tokens_cached_total") > 0
    rag = summary["rag"]["prompt_cache"]
    assert rag["requests"] == (df.workload == "rag").sum()
    assert rag["cached_tokens"] == df[df.workload == "rag"].cached_tokens.sum()
    assert rag["hit_share"] > 0.3  # half of each rag prompt is the shared passage text
    assert len(summary["stages"]) == 2
    for stage in summary["stages"]:
        assert stage["total"]["prompt_cache"]["requests"] == stage["total"]["requests"]
        assert stage["rag"]["prompt_cache"]["hit_share"] > 0.3
    assert any(t.startswith("Processed prompt tokens reconcile exactly") for t in findings), findings
    assert "prompt cache hits (" in stdout and "\nrag " in stdout, stdout[-2500:]
    report = (tmp_path / "run" / "report.html").read_text()
    assert "Prompt cache hits as the responses said them" in report
    assert f"<td>{rag['hit_share'] * 100:.1f}%</td>" in report


def test_vllm_face_with_the_flag_cached_tokens_equal_prefix_cache_hits(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", "--enable-prompt-tokens-details", trace=False) as s:
        _, df, summary, findings = run_rag(s.url, tmp_path / "run")
        metrics = scrape(s.url)
    assert df.cached_tokens.notna().all()  # vLLM 0.32 with the flag sends 0 too
    assert (df.cached_tokens % BLOCK == 0).all()  # whole KV blocks
    assert (df.cached_tokens == 0).any() and (df.cached_tokens > 0).any()
    assert int(df.cached_tokens.sum()) == counter(metrics, "vllm:prefix_cache_hits_total")
    assert int(df.prompt_tokens.sum()) == counter(metrics, "vllm:prefix_cache_queries_total")
    assert summary["total"]["prompt_cache"]["cached_tokens"] == df.cached_tokens.sum()
    assert any(t.startswith("Cached prompt tokens reconcile exactly") for t in findings), findings


def test_vllm_face_without_the_flag_says_nothing(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", trace=False) as s:
        stdout, df, summary, findings = run_rag(s.url, tmp_path / "run", "2s")
    assert df.cached_tokens.isna().all()
    assert summary["total"]["prompt_cache"] is None and summary["rag"]["prompt_cache"] is None
    assert "prompt cache hits (" not in stdout
    assert any("--enable-prompt-tokens-details" in t for t in findings), findings
