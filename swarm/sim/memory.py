"""The simulator's memory model: GPU memory, weights and KV dtype -> KV-cache tokens (pure).

    KV-cache tokens = (GPU memory x utilisation x GPUs - weights - reserve) / KV bytes per token

as vLLM sizes its cache after loading the weights and profiling a forward pass (the reserve:
activations, CUDA graphs, communication buffers). The bytes per token of a 16-bit cache are
layers x KV heads x head dim x 2 (K and V) x 2 bytes, or given directly where the profile's token
is an effective unit; an fp8 cache (vLLM `--kv-cache-dtype fp8*`) halves them, llama.cpp's
quantised caches (`--cache-type-k/v`) scale K and V apart by their bits per element.
"""

from __future__ import annotations

from dataclasses import dataclass

from swarm.core.errors import UsageError

GIB = 1024**3

# vLLM --kv-cache-dtype: bytes per element relative to the model's 16-bit cache
VLLM_KV_DTYPES = {"auto": 1.0, "fp8": 0.5, "fp8_e4m3": 0.5, "fp8_e5m2": 0.5}
# llama.cpp --cache-type-k/-v: bits per element / 16 (ggml block sizes: q8_0 is 34 bytes per 32
# values = 8.5 bits, q4_0 18 bytes = 4.5 bits, ...)
LLAMA_CACHE_TYPES = {
    "f32": 2.0,
    "f16": 1.0,
    "bf16": 1.0,
    "q8_0": 8.5 / 16,
    "q5_1": 6.0 / 16,
    "q5_0": 5.5 / 16,
    "q4_1": 5.0 / 16,
    "q4_0": 4.5 / 16,
    "iq4_nl": 4.5 / 16,
}


def attention_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """KV bytes one token takes over the whole model: K and V of every attention layer."""
    return layers * kv_heads * head_dim * 2 * dtype_bytes


@dataclass(frozen=True)
class Memory:
    """A profile's `[memory]` table: what turns GPU memory into KV-cache tokens."""

    gpu_memory_gib: float  # one GPU's memory as the driver reports it
    weights_gib: float  # the weights over all GPUs
    kv_bytes_per_token: float  # a 16-bit cache's bytes per token over all GPUs
    gpus: int = 1  # tensor parallel: the weights and the cache are split over them
    reserve_gib: float = 0.0  # activations, CUDA graphs, buffers over all GPUs
    gpu_memory_utilization: float = 0.9  # the share vLLM may use (its --gpu-memory-utilization)

    def validate(self, where: str) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise UsageError(f"{where} [memory]: {what}")

        need(self.gpu_memory_gib > 0, "gpu_memory_gib must be > 0")
        need(self.gpus >= 1, "gpus must be >= 1")
        need(self.weights_gib >= 0 and self.reserve_gib >= 0, "weights_gib and reserve_gib must be >= 0")
        need(self.kv_bytes_per_token > 0, "kv_bytes_per_token must be > 0")
        need(0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization must be in (0, 1]")

    def free_bytes(self, utilization: float) -> float:
        """The bytes left for the KV cache at this utilisation (negative: the weights do not fit)."""
        total = self.gpu_memory_gib * utilization * self.gpus
        return (total - self.weights_gib - self.reserve_gib) * GIB

    def kv_tokens(self, utilization: float, dtype_scale: float = 1.0) -> int:
        """KV-cache tokens at this utilisation with a cache `dtype_scale` times a 16-bit one's
        bytes; 0 when nothing is left for it."""
        free = self.free_bytes(utilization)
        return max(0, int(free // (self.kv_bytes_per_token * dtype_scale)))

    def tokens_fit(self, tokens: int, dtype_scale: float = 1.0) -> bool:
        """Whether a cache of `tokens` fits in all of the memory (llama.cpp: no utilisation cap)."""
        return tokens * self.kv_bytes_per_token * dtype_scale <= self.free_bytes(1.0)


def llama_dtype_scale(cache_type_k: str, cache_type_v: str) -> float:
    """K and V are half the cache each: their scales averaged."""
    return (LLAMA_CACHE_TYPES[cache_type_k] + LLAMA_CACHE_TYPES[cache_type_v]) / 2


def parse_memory(raw: dict, where: str) -> Memory:
    """`[memory]` from TOML: `kv_bytes_per_token`, or `kv_layers`, `kv_heads`, `head_dim` (16-bit)."""
    keys = {
        "gpu_memory_gib",
        "weights_gib",
        "kv_bytes_per_token",
        "gpus",
        "reserve_gib",
        "gpu_memory_utilization",
        "kv_layers",
        "kv_heads",
        "head_dim",
    }
    if unknown := set(raw) - keys:
        raise UsageError(f"{where}: unknown key(s) in [memory]: {sorted(unknown)}")
    kw = dict(raw)
    shape = [kw.pop(k, None) for k in ("kv_layers", "kv_heads", "head_dim")]
    if any(v is not None for v in shape):
        if None in shape or "kv_bytes_per_token" in kw:
            raise UsageError(
                f"{where} [memory]: give kv_layers, kv_heads and head_dim together, or kv_bytes_per_token"
            )
        kw["kv_bytes_per_token"] = attention_bytes_per_token(*(int(v) for v in shape))  # type: ignore[arg-type]
    for k in ("gpu_memory_gib", "weights_gib", "kv_bytes_per_token"):
        if k not in kw:
            raise UsageError(f"{where} [memory]: {k} is missing")
    try:
        mem = Memory(**kw)
    except TypeError as e:
        raise UsageError(f"{where} [memory]: {e}") from None
    mem.validate(where)
    return mem
