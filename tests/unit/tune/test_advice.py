"""swarm/tune/advice.py: every diagnosis kind to the next flag (or a stop), for vLLM and
llama-server, never a flag set already measured."""

from __future__ import annotations

import pytest

from swarm.tune.advice import COMPUTE_WHY, next_move

ROUND_1 = {"--max-num-seqs": "64", "--max-model-len": "65536"}  # the seed's round 1


def test_sequence_cap_doubles_max_num_seqs_the_seeds_first_move():
    m = next_move("vllm", ROUND_1, "max_num_seqs_cap")
    assert (m.flag, m.value, m.stop) == ("--max-num-seqs", "128", False)
    assert "64" in m.why and "128" in m.why


def test_sequence_cap_without_the_flag_starts_from_the_default_and_stops_at_the_most():
    m = next_move("vllm", {}, "max_num_seqs_cap")
    assert (m.flag, m.value) == ("--max-num-seqs", "512") and "default" in m.why
    assert next_move("vllm", {"--max-num-seqs": "768"}, "max_num_seqs_cap").value == "1024"
    assert next_move("vllm", {"--max-num-seqs": "1024"}, "max_num_seqs_cap").stop


def test_sequence_cap_on_llama_server_doubles_its_slots():
    m = next_move("llamacpp", {"-np": "4"}, "max_num_seqs_cap")
    assert (m.flag, m.value, m.stop) == ("-np", "8", False)
    assert next_move("llamacpp", {"--parallel": "2"}, "max_num_seqs_cap").flag == "--parallel"  # its spelling
    assert next_move("llamacpp", {}, "max_num_seqs_cap").value == "2"
    assert next_move("llamacpp", {"-np": "64"}, "max_num_seqs_cap").stop


def test_a_measured_flag_set_is_not_proposed_again():
    m = next_move("vllm", ROUND_1, "max_num_seqs_cap", tried=[ROUND_1, {**ROUND_1, "--max-num-seqs": "128"}])
    assert m.stop and "measured" in m.why


def test_kv_bound_on_vllm_walks_memory_dtype_then_context():
    flags = {"--max-num-seqs": "256", "--max-model-len": "16384"}
    seen = []
    tried = [dict(flags)]
    for _ in range(10):
        m = next_move("vllm", flags, "kv_bound", tried=tried)
        if m.stop:
            break
        seen.append((m.flag, m.value))
        flags = {**flags, m.flag: m.value}
        tried.append(dict(flags))
    assert seen == [
        ("--gpu-memory-utilization", "0.92"),
        ("--gpu-memory-utilization", "0.95"),
        ("--kv-cache-dtype", "fp8"),
        ("--max-model-len", "8192"),
        ("--max-model-len", "4096"),
    ]
    assert m.stop and m.flag is None and "GPU" in m.why


def test_kv_bound_skips_what_is_set_or_tried():
    flags = {"--gpu-memory-utilization": "0.95", "--kv-cache-dtype": "fp8_e4m3"}
    assert next_move("vllm", flags, "kv_bound").stop  # no --max-model-len to halve
    tried = [{"--gpu-memory-utilization": "0.92"}]
    assert next_move("vllm", {}, "kv_bound", tried=tried).value == "0.95"


def test_kv_bound_on_llama_server_quantises_the_cache_then_grows_it():
    flags = {"-np": "4", "-c": "8192"}
    seen = []
    for _ in range(10):
        m = next_move("llamacpp", flags, "kv_bound")
        if m.stop:
            break
        seen.append((m.flag, m.value))
        flags = {**flags, m.flag: m.value}
    assert seen[:4] == [
        ("--cache-type-k", "q8_0"),
        ("--cache-type-v", "q8_0"),
        ("--cache-type-k", "q4_0"),
        ("--cache-type-v", "q4_0"),
    ]
    assert seen[4] == ("-c", "16384")  # then -c doubles


def test_kv_bound_on_llama_server_without_c_stops_after_the_cache_types():
    flags = {"--cache-type-k": "q4_0", "--cache-type-v": "q4_0"}
    assert next_move("llamacpp", flags, "kv_bound").stop


def test_front_end_doubles_api_servers_on_vllm_and_stops_on_llama_server():
    for kind in ("frontend_bound", "outside_engine"):
        m = next_move("vllm", {}, kind)
        assert (m.flag, m.value, m.stop) == ("--api-server-count", "2", False)
        assert next_move("vllm", {"--api-server-count": "2"}, kind).value == "4"
        assert next_move("vllm", {"--api-server-count": "16"}, kind).stop
        assert next_move("llamacpp", {}, kind).stop


@pytest.mark.parametrize("kind", ["compute_bound", "gpu_busy"])
def test_compute_bound_stops_and_says_what_would_help(kind):
    m = next_move("vllm", ROUND_1, kind)
    assert m.stop and m.flag is None and COMPUTE_WHY in m.why
    assert "speculative decoding" in m.why and "quantisation" in m.why


def test_client_bound_stops_add_workers():
    m = next_move("vllm", {}, "client_bound")
    assert m.stop and "add workers" in m.why


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("network_delay", "closer"),
        ("no_saturation", "raise the load"),
        ("no_server_metrics", "No server metrics"),
        (None, "no bottleneck"),
        ("saturation", "'saturation'"),
        ("something_new", "'something_new'"),
    ],
)
def test_the_other_kinds_stop_and_say_why(kind, words):
    m = next_move("llamacpp", {}, kind)
    assert m.stop and m.flag is None and m.value is None and words in m.why
