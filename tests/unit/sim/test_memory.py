"""swarm/sim/memory.py: GPU memory, weights and KV dtype -> KV-cache tokens."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.sim.memory import (
    GIB,
    LLAMA_CACHE_TYPES,
    VLLM_KV_DTYPES,
    Memory,
    attention_bytes_per_token,
    llama_dtype_scale,
    parse_memory,
)


def test_bytes_per_token_are_layers_heads_dim_k_and_v_two_bytes():
    assert attention_bytes_per_token(16, 4, 256) == 16 * 4 * 256 * 2 * 2 == 64 * 1024
    assert attention_bytes_per_token(32, 8, 128, dtype_bytes=1) == 32 * 8 * 128 * 2


def test_kv_tokens_are_what_the_utilisation_leaves_over_bytes_per_token():
    mem = Memory(gpu_memory_gib=80, weights_gib=16, reserve_gib=4, kv_bytes_per_token=128 * 1024, gpus=2)
    # 0.9 x 80 x 2 = 144 GiB; - 16 - 4 = 124 GiB; / 128 KiB = 124 x 8192 tokens
    assert mem.kv_tokens(0.9) == 124 * 8192
    assert mem.kv_tokens(0.9, VLLM_KV_DTYPES["fp8"]) == 2 * 124 * 8192  # fp8 halves the bytes
    assert mem.kv_tokens(0.5) == (80 - 20) * 8192  # 80 GiB over two GPUs at 0.5
    assert mem.kv_tokens(0.1) == 0  # the weights do not fit: nothing left
    assert mem.tokens_fit(140 * 8192) and not mem.tokens_fit(141 * 8192)  # llama.cpp: all of it
    assert mem.free_bytes(1.0) == 140 * GIB


def test_llama_cache_types_scale_k_and_v_apart():
    assert LLAMA_CACHE_TYPES["q8_0"] == 8.5 / 16 and LLAMA_CACHE_TYPES["q4_0"] == 4.5 / 16
    assert llama_dtype_scale("f16", "f16") == 1.0
    assert llama_dtype_scale("q4_0", "q8_0") == pytest.approx((4.5 + 8.5) / 32)


def test_parse_memory_takes_the_shape_or_the_bytes_and_checks_them():
    shape = {"gpu_memory_gib": 24, "weights_gib": 8, "kv_layers": 32, "kv_heads": 8, "head_dim": 128}
    assert parse_memory(shape, "p").kv_bytes_per_token == 32 * 8 * 128 * 4
    for bad, match in (
        ({**shape, "kv_bytes_per_token": 5}, "together"),
        ({"gpu_memory_gib": 24, "weights_gib": 8, "kv_layers": 32}, "together"),
        ({"gpu_memory_gib": 24, "kv_bytes_per_token": 5}, "weights_gib is missing"),
        ({**shape, "vram": 3}, "unknown key"),
        ({**shape, "gpu_memory_utilization": 1.5}, r"\(0, 1\]"),
        ({**shape, "gpus": 0}, "gpus"),
    ):
        with pytest.raises(UsageError, match=match):
            parse_memory(bad, "p")
