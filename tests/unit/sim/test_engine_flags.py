"""swarm/sim/engine_flags.py: `swarm sim` takes vLLM's and llama-server's engine flags, and the
calibrated profile's memory model keeps its answer at the seed's round-2 flags."""

from __future__ import annotations

import pytest

from swarm.cli import build_parser
from swarm.cli import main as swarm_main
from swarm.core.errors import UsageError
from swarm.sim.calibrate import SHORT_QA_PROMPTS, closed_loop
from swarm.sim.cli import build_config
from swarm.sim.profile import load_profile

RTX = "rtx5090x4-qwen3.6-27b"
ROUND_1 = ["--max-num-seqs", "64", "--max-model-len", "65536", "--gpu-memory-utilization", "0.90"]
ROUND_2 = [
    "--gpu-memory-utilization", "0.92", "--max-model-len", "16384", "--max-num-seqs", "256",
    "--enable-chunked-prefill", "--max-num-batched-tokens", "16384", "--enable-prefix-caching",
]  # fmt: skip


def profile_of(*argv: str):
    return build_config(build_parser().parse_args(["sim", *argv])).profile


def test_the_calibrated_capacity_is_kept_at_the_seed_s_round_2_flags():
    calibrated = load_profile(RTX)
    p = profile_of("--profile", RTX, *ROUND_2)
    assert p.kv_cache_tokens == calibrated.kv_cache_tokens == 69000
    assert p == calibrated  # every engine field: the round-2 flags are the profile's own


def test_round_1_flags_run_64_with_kv_far_from_full():
    p = profile_of("--profile", RTX, *ROUND_1)
    assert (p.max_num_seqs, p.max_model_len) == (64, 65536)
    assert 65536 + p.seq_state_tokens + p.block_size <= p.kv_cache_tokens < 69000  # 0.90 holds 65536
    level = closed_loop(p, SHORT_QA_PROMPTS, 50, 128, warmup_s=2, duration_s=4)
    assert level.mean_running > 60 and level.max_kv < 0.5  # sequence-capped, KV far from full
    level = closed_loop(profile_of("--profile", RTX, *ROUND_2), SHORT_QA_PROMPTS, 50, 256, 2, 4)
    assert level.mean_running > 150 and level.max_kv > 0.9  # round 2: KV-bound


def test_memory_utilisation_and_kv_dtype_set_the_capacity():
    mem = load_profile(RTX).memory
    assert profile_of("--profile", RTX, "--gpu-memory-utilization", "0.95").kv_cache_tokens == mem.kv_tokens(
        0.95
    )
    assert mem.kv_tokens(0.90) < 69000 < mem.kv_tokens(0.95)
    fp8 = profile_of("--profile", RTX, "--kv-cache-dtype", "fp8_e4m3").kv_cache_tokens
    assert fp8 == mem.kv_tokens(0.92, 0.5) == 138000  # half the bytes, twice the tokens
    assert (
        profile_of("--profile", RTX, "--kv-cache-dtype", "fp8", "--kv-cache-tokens", "50000").kv_cache_tokens
        == 50000
    )
    assert profile_of("--gpu-memory-utilization", "0.45").kv_cache_tokens == 2097152 // 2  # instant: 80 GiB


def test_a_cache_that_cannot_hold_one_full_length_request_is_refused_as_vllm_does():
    with pytest.raises(UsageError, match="--max-model-len 65536 needs 65536 KV tokens"):
        profile_of("--profile", RTX, "--gpu-memory-utilization", "0.88", "--max-model-len", "65536")
    with pytest.raises(UsageError, match="no memory left"):
        profile_of("--profile", RTX, "--gpu-memory-utilization", "0.3")


def test_chunked_prefill_and_prefix_caching_switches():
    assert (
        profile_of("--no-enable-chunked-prefill", "--max-num-batched-tokens", "32768").chunked_prefill
        is False
    )
    with pytest.raises(UsageError, match="without chunked prefill"):
        profile_of("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    assert profile_of("--no-enable-prefix-caching").prefix_caching is False
    assert profile_of("--no-prefix-caching").prefix_caching is False
    assert profile_of("--enable-prefix-caching").prefix_caching is True
    with pytest.raises(UsageError, match="contradict"):
        profile_of("--no-prefix-caching", "--enable-prefix-caching")


def test_llama_server_flags_set_slots_context_and_batches():
    p = profile_of(
        "--server", "llamacpp", "--profile", RTX, "-np", "4", "-c", "32768", "-b", "2048", "-ub", "512"
    )
    assert (p.max_num_seqs, p.max_model_len) == (4, 8192)  # each slot gets -c / -np
    assert p.kv_cache_tokens == 32768 + 4 * (p.seq_state_tokens + p.block_size)
    assert (p.max_num_batched_tokens, p.ubatch_tokens) == (2048, 512)
    long = ("--server", "llamacpp", "--parallel", "2", "--ctx-size", "131072", "--ubatch-size", "4096")
    p = profile_of(*long, "--batch-size", "1024")
    assert (p.max_num_seqs, p.max_model_len, p.ubatch_tokens) == (2, 65536, 1024)  # -ub is at most -b
    with pytest.raises(UsageError, match="failed to allocate the KV cache"):
        profile_of("--server", "llamacpp", "--profile", RTX, "-c", "131072")  # f16: 114 GiB
    p = profile_of(
        "--server", "llamacpp", "--profile", RTX, "-c", "131072", "-ctk", "q4_0", "--cache-type-v", "q4_0"
    )
    assert p.max_model_len == 131072 // 256  # the profile's 256 slots share it
    with pytest.raises(UsageError, match="set the same thing"):
        profile_of("--server", "llamacpp", "-np", "4", "--max-num-seqs", "4")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--server", "llamacpp", "--gpu-memory-utilization", "0.9"],
            "--gpu-memory-utilization is vLLM's flag",
        ),
        (["--server", "llamacpp", "--no-enable-chunked-prefill"], "--[no-]enable-chunked-prefill is vLLM's"),
        (["--server", "llamacpp", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype is vLLM's flag"),
        (["-np", "4"], "-np/--parallel is llama-server's flag; --server vllm does not take it"),
        (["--cache-type-k", "q8_0"], "--cache-type-k is llama-server's flag"),
        (["-ub", "512"], "-ub/--ubatch-size is llama-server's flag"),
        (["--server", "llamacpp", "-c", "0"], "must be a positive integer"),
        (["--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
    ],
)
def test_a_flag_the_face_does_not_take_is_one_line_and_exit_2(capsys, argv, message):
    assert swarm_main(["sim", "--port", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
