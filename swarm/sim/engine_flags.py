"""The real servers' engine flags on `swarm sim`: vLLM's and llama-server's, turned into the
profile's engine fields, so a command line that starts one starts the simulator the same way.

vLLM: `--max-num-seqs --max-num-batched-tokens --max-model-len --gpu-memory-utilization
--kv-cache-dtype --[no-]enable-chunked-prefill --[no-]enable-prefix-caching`; llama-server
(`--server llamacpp`): `-np/--parallel -c/--ctx-size -ctk/--cache-type-k -ctv/--cache-type-v
-b/--batch-size -ub/--ubatch-size`. A flag of the other server is refused in one line.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from swarm.core.errors import UsageError
from swarm.sim.memory import GIB, LLAMA_CACHE_TYPES, VLLM_KV_DTYPES, llama_dtype_scale
from swarm.sim.profile import Profile

VLLM_ONLY = {
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_dtype": "--kv-cache-dtype",
    "chunked_prefill": "--[no-]enable-chunked-prefill",
    "enable_prefix_caching": "--[no-]enable-prefix-caching",
}
LLAMA_ONLY = {
    "parallel": "-np/--parallel",
    "ctx_size": "-c/--ctx-size",
    "cache_type_k": "--cache-type-k",
    "cache_type_v": "--cache-type-v",
    "batch_size": "-b/--batch-size",
    "ubatch_size": "-ub/--ubatch-size",
}


def configure(parser: argparse.ArgumentParser) -> None:
    v = parser.add_argument_group("vLLM's engine flags (--server vllm)")
    v.add_argument(
        "--gpu-memory-utilization",
        type=float,
        metavar="F",
        help="share of GPU memory for weights, activations and KV cache: the profile's [memory] "
        "gives the KV-cache tokens what is left (default: the profile's)",
    )
    v.add_argument(
        "--kv-cache-dtype",
        choices=tuple(VLLM_KV_DTYPES),
        help="KV-cache element type: auto (the model's 16 bits) or fp8 (half the bytes, twice the tokens)",
    )
    v.add_argument(
        "--enable-chunked-prefill",
        dest="chunked_prefill",
        action=argparse.BooleanOptionalAction,
        help="split long prefills over steps (default: on); off, a prompt waits for a step that holds "
        "it whole and --max-num-batched-tokens must be at least --max-model-len",
    )
    v.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        help="prefix caching (default: the profile's; --no-prefix-caching is the same as the no- form)",
    )
    ll = parser.add_argument_group("llama-server's flags (--server llamacpp)")
    ll.add_argument("-np", "--parallel", type=int, metavar="N", help="slots: sequences decoded at once")
    ll.add_argument(
        "-c",
        "--ctx-size",
        type=int,
        metavar="N",
        help="context of all slots together: each slot gets N / slots",
    )
    ll.add_argument(
        "-ctk", "--cache-type-k", choices=tuple(LLAMA_CACHE_TYPES), help="K cache type (default: f16)"
    )
    ll.add_argument(
        "-ctv", "--cache-type-v", choices=tuple(LLAMA_CACHE_TYPES), help="V cache type (default: f16)"
    )
    ll.add_argument("-b", "--batch-size", type=int, metavar="N", help="tokens one step takes (logical batch)")
    ll.add_argument(
        "-ub",
        "--ubatch-size",
        type=int,
        metavar="N",
        help="physical batch: a step pays the profile's fixed step cost once per N tokens",
    )


def _given(args: argparse.Namespace, dests: dict[str, str]) -> list[str]:
    return [flag for dest, flag in dests.items() if getattr(args, dest, None) is not None]


def _positive(args: argparse.Namespace) -> None:
    for dest in ("parallel", "ctx_size", "batch_size", "ubatch_size"):
        value = getattr(args, dest)
        if value is not None and value < 1:
            raise UsageError(f"{LLAMA_ONLY[dest]} {value}: must be a positive integer")
    u = args.gpu_memory_utilization
    if u is not None and not (0 < u <= 1 and math.isfinite(u)):
        raise UsageError(f"--gpu-memory-utilization {u}: must be in (0, 1], e.g. 0.9")


def engine_overrides(args: argparse.Namespace, server: str, profile: Profile) -> dict[str, Any]:
    """The profile fields these flags set (None: the profile's), for `Profile.with_overrides`.
    UsageError on a flag of the other server, two flags for one field, or a cache that does not fit."""
    _positive(args)
    llama = server == "llamacpp"
    if wrong := _given(args, VLLM_ONLY if llama else LLAMA_ONLY):
        other = "vLLM" if llama else "llama-server"
        raise UsageError(f"{wrong[0]} is {other}'s flag; --server {server} does not take it")
    if args.no_prefix_caching and args.enable_prefix_caching:
        raise UsageError("--no-prefix-caching and --enable-prefix-caching contradict each other")
    caching = False if args.no_prefix_caching else args.enable_prefix_caching
    common = {"block_size": args.block_size, "prefix_caching": caching}
    if llama:
        return common | _llama(args, profile)
    return common | {
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_model_len": args.max_model_len,
        "chunked_prefill": args.chunked_prefill,
        "kv_cache_tokens": _vllm_kv_tokens(args, profile),
    }


def _vllm_kv_tokens(args: argparse.Namespace, profile: Profile) -> int | None:
    """vLLM's sizing: the memory left at this utilisation over the bytes per token of this dtype."""
    if args.kv_cache_tokens is not None:
        return args.kv_cache_tokens
    if args.gpu_memory_utilization is None and args.kv_cache_dtype is None:
        return None
    mem = profile.memory
    if mem is None:
        raise UsageError(
            f"--gpu-memory-utilization/--kv-cache-dtype need a profile with a [memory] table; "
            f"{profile.name!r} has none (give --kv-cache-tokens)"
        )
    utilization = args.gpu_memory_utilization or mem.gpu_memory_utilization
    scale = VLLM_KV_DTYPES[args.kv_cache_dtype or "auto"]
    tokens = mem.kv_tokens(utilization, scale)
    if tokens <= 0:
        raise UsageError(
            f"--gpu-memory-utilization {utilization}: no memory left for the KV cache after the weights "
            f"({mem.weights_gib:g} GiB) and reserve; raise it (vLLM: 'No available memory for the cache blocks')"
        )
    max_len = args.max_model_len or profile.max_model_len
    if tokens < max_len:  # vLLM's own start check (the profile adds its state and a block)
        raise UsageError(
            f"--max-model-len {max_len} needs {max_len} KV tokens but --gpu-memory-utilization "
            f"{utilization} leaves {tokens}; raise the utilisation or lower --max-model-len (as vLLM refuses to start)"
        )
    return tokens


def _llama(args: argparse.Namespace, profile: Profile) -> dict[str, Any]:
    """llama-server: -np slots, -c the context all slots share, -b/-ub the step's tokens."""
    for a, b in (
        ("parallel", "max_num_seqs"),
        ("ctx_size", "max_model_len"),
        ("batch_size", "max_num_batched_tokens"),
    ):
        if getattr(args, a) is not None and getattr(args, b) is not None:
            raise UsageError(f"{LLAMA_ONLY[a]} and --{b.replace('_', '-')} set the same thing; give one")
    slots = args.parallel or args.max_num_seqs or profile.max_num_seqs
    batch = args.batch_size or args.max_num_batched_tokens
    ubatch = (
        None if args.ubatch_size is None else min(args.ubatch_size, batch or profile.max_num_batched_tokens)
    )
    out: dict[str, Any] = {
        "max_num_seqs": slots,
        "max_num_batched_tokens": batch,
        "ubatch_tokens": ubatch,
        "max_model_len": args.max_model_len,
        "kv_cache_tokens": args.kv_cache_tokens,
    }
    ctx = args.ctx_size
    if ctx is None:
        return out
    out["max_model_len"] = ctx // slots
    if out["max_model_len"] < 2:
        raise UsageError(f"-c {ctx} over {slots} slots leaves each under 2 tokens of context")
    mem = profile.memory
    scale = llama_dtype_scale(args.cache_type_k or "f16", args.cache_type_v or "f16")
    if mem is not None and not mem.tokens_fit(ctx, scale):
        need = ctx * mem.kv_bytes_per_token * scale / GIB
        raise UsageError(
            f"-c {ctx}: its KV cache needs {need:.1f} GiB, the GPUs have {mem.free_bytes(1.0) / GIB:.1f} GiB "
            "after the weights (llama-server: failed to allocate the KV cache); lower -c or quantise the cache"
        )
    if args.kv_cache_tokens is None:  # the cells of -c, plus each slot's recurrent state and a partial block
        out["kv_cache_tokens"] = ctx + slots * (profile.seq_state_tokens + profile.block_size)
    return out
