"""A real `swarm run` (master + worker) against the simulator says what it was: summary.json's
provenance holds the server's version, model and max_model_len as its own endpoints answer them,
the report's header shows them, the master's /metrics has `swarm_run_info`, and each record
carries the server's request id, the one the simulator traced for it."""

from __future__ import annotations

import hashlib
import json
import urllib.request

import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.support import free_port, sim_server, start, swarm_cmd, wait_for

pytestmark = pytest.mark.integration
KEY = "sk-provenance-test-9f8e7d6c5b4a"


def _run_info(port: int) -> dict[str, str] | None:
    """The master's swarm_run_info labels once the target's version is in them, else None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "swarm_run_info" and s.labels.get("target_version") != "unknown":
                return dict(s.labels)
    return None


def test_a_run_says_what_it_was_and_joins_the_server_s_trace(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say {i}", "max_tokens": 4}) + "\n" for i in range(20)))
    out, port = tmp_path / "run", free_port()
    with sim_server(tmp_path, "--profile", "instant", "--api-key", KEY) as sim:
        listing = json.loads(_get(sim.url + "/v1/models"))["data"][0]
        version = json.loads(_get(sim.url + "/version"))["version"]
        cmd = swarm_cmd("run", "--host", sim.url, "-u", "2", "-t", "2s", "--out", str(out), "--workload", "custom",
                        "--prompt-file", str(prompts), "--seed", "7", "--prometheus-port", str(port),
                        "--target-command", f"swarm sim --profile instant --api-key {KEY}")  # fmt: skip
        seen: dict[str, dict[str, str] | None] = {}
        with start(cmd, tmp_path / "run.log", env={"OPENAI_API_KEY": KEY}) as run:
            wait_for(lambda: seen.update(info=_run_info(port)) or seen["info"], 30, "swarm_run_info")
            assert run.wait(60) == 0, run.output()[-3000:]
        trace = [json.loads(line) for line in sim.trace.read_text().splitlines()]

    summary_text = (out / "summary.json").read_text()
    p = json.loads(summary_text)["provenance"]
    target = p["targets"][sim.url]
    assert target["family"] == "vllm" and target["version"] == version
    assert target["model"] == listing["id"] and target["root"] == listing["root"]
    assert target["max_model_len"] == listing["max_model_len"] and target["launch_flags"] == "unknown"
    assert p["target_command"] == "swarm sim --profile instant --api-key ***"
    assert p["files"]["prompt_file"]["sha256"] == hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert p["seed"] == 7 and p["options"]["workload"] == "custom" and p["workers"]
    assert KEY[:8] not in summary_text.lower() and "api_key" not in p["options"]  # the key in no form

    assert seen["info"] == {
        "version": p["swarm"]["version"],
        "target_family": "vllm",
        "target_version": version,
        "model": listing["id"],
        "workload": "custom",
        "run_id": json.loads(summary_text)["run_id"],
    }
    report = (out / "report.html").read_text()
    assert f"vllm {version}, model {listing['id']}" in report
    assert f"max_model_len {listing['max_model_len']}" in report

    df = pq.read_table(out / "requests.parquet").to_pandas()
    ok = df[df.outcome == "ok"]
    assert len(ok) > 10 and ok.request_id.notna().all() and ok.request_id.is_unique
    traced = {t["id"] for t in trace}
    assert set(ok.request_id) <= traced  # each record names the request the server traced
    answered = {t["id"] for t in trace if t["status"] == 200 and t["end_time"] is not None}
    assert answered <= set(df.request_id.dropna())  # and every answer the server gave is a record's


def _get(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read()
