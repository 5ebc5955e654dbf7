"""The tests a real llama-server passes (tests/e2e/test_llamacpp_real.py), passed by the simulator's
llama.cpp face too (`swarm sim --server llamacpp`): totals reconcile with its `llamacpp:` counters,
a sweep past the slots pins `requests_processing` and grows `requests_deferred` (and the diagnosis
names the slot limit), exact prompt lengths via its /apply-template + /tokenize, and every request
ok although it closes each streamed connection. No llama-server is needed: these run everywhere.

The simulator runs tests/helpers/data/slow-decode.toml (20 ms a step, so slots stay busy between
scrapes) with 2 slots of 2,048 tokens, as the real fixture's llama-server, and a fifth of its
tokens ending inside a UTF-8 character (several tokens per event, as llama.cpp sends them).
"""

from __future__ import annotations

import pytest

from tests.e2e import test_llamacpp_real as real
from tests.helpers.llamacpp_fixture import CTX_SIZE, SLOTS, LlamaTarget
from tests.helpers.support import REPO, sim_server

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def llama_sim(tmp_path_factory):
    with sim_server(
        tmp_path_factory.mktemp("llama-sim"),
        "--server",
        "llamacpp",
        "--profile",
        str(REPO / "tests" / "helpers" / "data" / "slow-decode.toml"),
        "--max-num-seqs",
        str(SLOTS),
        "--max-model-len",
        str(CTX_SIZE // SLOTS),
        "--utf8-split",
        "0.2",
        model="tiny-qwen2",
        trace=False,
    ) as sim:
        yield LlamaTarget(sim.url, "tiny-qwen2", cpu=False, max_num_seqs=SLOTS)


def test_stream_has_usage_and_timings(llama_sim, llamacpp_report):
    for endpoint, thinking in (("chat", False), ("chat", True), ("completions", None)):
        real.test_stream_has_llamacpps_usage_and_timings(llama_sim, llamacpp_report, endpoint, thinking)


def test_errors_carry_the_servers_message(llama_sim, llamacpp_report):
    real.test_errors_carry_the_servers_message(llama_sim, llamacpp_report)


def test_totals_equal_the_counters(llama_sim, llamacpp_report, tmp_path):
    real.test_swarm_totals_equal_llamacpp_counters(llama_sim, llamacpp_report, tmp_path)


def test_sweep_past_the_slots(llama_sim, llamacpp_report, tmp_path):
    real.test_sweep_past_the_slots_pins_processing_and_defers(llama_sim, llamacpp_report, tmp_path)


def test_streamed_response_closes_the_connection(llama_sim, llamacpp_report):
    real.test_streamed_response_closes_the_connection(llama_sim, llamacpp_report)


def test_exact_prompt_lengths_by_its_own_count(llama_sim, llamacpp_report, tmp_path):
    real.test_synthetic_prompts_have_exact_lengths_by_llamacpps_own_count(
        llama_sim, llamacpp_report, tmp_path
    )
