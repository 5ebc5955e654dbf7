"""Several models (`--model a:3,b:1`, LoRA adapters as vLLM serves them) on a simulator serving
two: the split holds 3:1 over 2,000+ requests, and the swarm's per-model totals (requests,
prompt and generation tokens) equal the simulator's per-model counters exactly; a model the
target does not serve, or a bad spec, is one line and exit 2."""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from tests.helpers.locust_run import run_locust
from tests.helpers.sim_http import call, scrape
from tests.helpers.support import sim_server, swarm_cmd

MODELS = ("base", "sql-lora")


def _per_model(samples: dict, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (n, labels), v in samples.items():
        if n == name:
            m = dict(labels)["model_name"]
            out[m] = out.get(m, 0.0) + v
    return out


@pytest.mark.integration
def test_the_sim_serves_several_models_as_vllm_does(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", trace=False, model="base,sql-lora") as s:
        listed = call(s.url, "/v1/models", method="GET").json()["data"]
        assert [(m["id"], m["parent"]) for m in listed] == [("base", None), ("sql-lora", "base")]
        body = {"model": "sql-lora", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        answer = call(s.url, "/v1/chat/completions", body).json()
        assert answer["model"] == "sql-lora" and answer["usage"]["completion_tokens"] == 3
        nope = call(s.url, "/v1/chat/completions", {**body, "model": "nope"})
        assert nope.status == 404
        assert nope.json() == {
            "error": {
                "message": "The model `nope` does not exist. Valid aliases: base, sql-lora.",
                "type": "NotFoundError",
                "param": "model",
                "code": 404,
            }
        }
        samples = scrape(s.url)
    assert _per_model(samples, "vllm:generation_tokens_total") == {"base": 0.0, "sql-lora": 3.0}
    assert _per_model(samples, "vllm:request_success_total") == {"base": 0.0, "sql-lora": 1.0}
    # the engine is one (LoRA adapters share it): its gauges carry the base model's name only
    assert _per_model(samples, "vllm:num_requests_running") == {"base": 0.0}


@pytest.mark.serial
@pytest.mark.integration
def test_a_3_to_1_split_holds_and_reconciles_per_model(tmp_path):
    out = tmp_path / "run"
    with sim_server(tmp_path, "--profile", "instant", trace=False, model="base,sql-lora") as s:
        cmd = swarm_cmd("run", "--host", s.url, "--workers", "2", "-u", "8", "-t", "6s", "--out", str(out),
                        "--workload", "short_qa", "--model", "base:3,sql-lora:1",
                        "--", "--max-tokens", "4")  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        samples = scrape(s.url)
    df = pq.read_table(out / "requests.parquet").to_pandas()
    assert len(df) >= 2000, f"only {len(df)} requests in 6 s"
    assert (df.outcome == "ok").all() and set(df.model) == set(MODELS)
    share = (df.model == "base").mean()
    assert abs(share - 0.75) < 0.03, share
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_name"] == "base:3,sql-lora:1" and set(summary["models"]) == set(MODELS)
    served = _per_model(samples, "vllm:request_success_total")
    prompt = _per_model(samples, "vllm:prompt_tokens_total")
    generated = _per_model(samples, "vllm:generation_tokens_total")
    for m in MODELS:
        block, mine = summary["models"][m], df[df.model == m]
        assert block["requests"] == len(mine) == served[m]
        assert block["prompt_tokens"] == mine.prompt_tokens.sum() == prompt[m]
        assert block["output_tokens"] == mine.output_tokens.sum() == generated[m]
    assert "  model base" in p.stdout and "  model sql-lora" in p.stdout  # the table: a row per model
    report = (out / "report.html").read_text()
    assert "model base" in report and "model sql-lora" in report


@pytest.mark.integration
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("a:0", "weight '0' of 'a' is not a number > 0"),
        ("a:x,base:1", "a:x is not served by the target; it serves: base, sql-lora"),  # a name, unserved
        ("", "empty --model"),
        ("base:3,nope:1", "nope is not served by the target; it serves: base, sql-lora"),
        ("nope", "nope is not served by the target; it serves: base, sql-lora"),  # one model, on vLLM
    ],
)
def test_bad_or_unserved_models_are_one_line_and_exit_2(tmp_path, spec, says):
    with sim_server(tmp_path, "--profile", "instant", trace=False, model="base,sql-lora") as s:
        cmd = swarm_cmd("run", "--host", s.url, "--workers", "1", "-u", "1", "-t", "5s",
                        "--out", str(tmp_path / "run"), "--model", spec)  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout[-1500:] + p.stderr[-1500:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in p.stderr, p.stderr


@pytest.mark.integration
def test_plain_locust_checks_the_split_at_test_start(tmp_path):
    """Without `swarm run`'s own check: the user's test start refuses an unserved model (of a split,
    or the one --model on vLLM), exit 2."""
    with sim_server(tmp_path, "--profile", "instant", trace=False, model="base,sql-lora") as s:
        bad, _, _ = run_locust(tmp_path, s.url, "--model", "base:3,nope:1", run_time="5s")
        ok, records, _ = run_locust(tmp_path, s.url, "--model", "base:1,sql-lora:1", "--max-tokens", "4",
                                    run_time="3s")  # fmt: skip
        one, _, _ = run_locust(tmp_path, s.url, "--model", "nope", run_time="5s")
    for p in (bad, one):
        assert p.returncode == 2, p.stderr[-1500:]
        errors = [line for line in p.stderr.splitlines() if "ERROR" in line]
        assert len(errors) == 1 and "nope is not served by the target; it serves: base, sql-lora" in errors[0]
    assert ok.returncode == 0, ok.stderr[-1500:]
    assert records and {r["model"] for r in records} == set(MODELS)
    assert all(r["outcome"] == "ok" for r in records)
