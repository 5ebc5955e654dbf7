"""`swarm sim` started with a real server's command-line flags, as `swarm tune` starts it:
vLLM's round-2 flags of seed 000 and its /reset_prefix_cache, llama-server's -np/-c and its 404."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers.sim_http import call, metric, scrape
from tests.helpers.support import REPO, sim_server, swarm_cmd

pytestmark = pytest.mark.integration

SEED_ROUND_2 = (
    "--max-model-len", "16384", "--gpu-memory-utilization", "0.92", "--max-num-seqs", "256",
    "--enable-chunked-prefill", "--max-num-batched-tokens", "16384", "--enable-prefix-caching",
)  # fmt: skip
PROMPT = {"model": "sim-model", "prompt": "the same long prefix " * 40, "max_tokens": 2}


def test_vllm_flags_start_it_and_reset_prefix_cache_empties_the_cache(tmp_path):
    with sim_server(tmp_path, "--profile", "instant", *SEED_ROUND_2, trace=False) as sim:
        models = json.loads(sim.get("/v1/models"))
        assert models["data"][0]["max_model_len"] == 16384
        for _ in range(2):
            assert call(sim.url, "/v1/completions", PROMPT).status == 200
        hits = metric(scrape(sim.url), "vllm:prefix_cache_hits_total")
        assert hits > 0  # the second request hit the first one's blocks
        reset = call(sim.url, "/reset_prefix_cache")
        assert (reset.status, reset.raw) == (200, b"")
        assert call(sim.url, "/v1/completions", PROMPT).status == 200
        assert metric(scrape(sim.url), "vllm:prefix_cache_hits_total") == hits  # cold after the reset


def test_llama_server_flags_start_it_and_it_has_no_reset_endpoint(tmp_path):
    with sim_server(
        tmp_path, "--server", "llamacpp", "-np", "2", "-c", "8192", "-ctk", "q8_0", trace=False
    ) as sim:
        assert call(sim.url, "/reset_prefix_cache").status == 404
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        assert call(sim.url, "/v1/chat/completions", body).status == 200


def test_a_flag_of_the_other_server_is_one_line_and_exit_2():
    res = subprocess.run(
        swarm_cmd(
            "sim", "--port", "0", "--server", "llamacpp", "--max-num-seqs", "4", "--kv-cache-dtype", "fp8"
        ),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
    )
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "swarm sim: error: --kv-cache-dtype is vLLM's flag; --server llamacpp does not take it"
    ]
