"""`swarm tune --guided`: from the diagnosis' bottleneck to the next server flag to change, and why
(pure: the family, the current flags and the bottleneck kind in, a `Move` out).

The mapping, kind by kind (the kinds of analysis/bottleneck.py, client_bound.py, ttft_gap.py,
ceiling.py and gpu_diagnosis.py):
- `max_num_seqs_cap` (running requests pinned below the users, KV far from full): the scheduler's cap
  doubled: vLLM `--max-num-seqs` (default 256, up to 1024), llama-server `-np` (its slots; up to 64);
- `kv_bound` (KV cache full, preemptions): more room for the KV cache, in order. vLLM: raise
  `--gpu-memory-utilization` to 0.92, then 0.95; `--kv-cache-dtype fp8` (half the bytes per token);
  halve `--max-model-len` (not below 4096). llama-server: `--cache-type-k q8_0`, `--cache-type-v q8_0`
  (a quantised V cache needs flash attention, -fa), then both q4_0, then double `-c` (its KV size,
  shared by the slots) when the command sets it;
- `frontend_bound`, `outside_engine` (requests wait outside the engine): vLLM `--api-server-count`
  doubled (the API front-end is the one part of that path a flag widens); llama-server: stop;
- `compute_bound`, `gpu_busy`: stop: no flag helps, the GPU is busy;
- `client_bound`: stop: the load generator is the limit;
- `network_delay`, `no_saturation`, `no_server_metrics`, None or anything else: stop, saying why.
A flag set already measured (`tried`) is never proposed again: the next step in the order is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

VLLM_MAX_NUM_SEQS = (256, 1024)  # (vLLM's default, the most proposed)
LLAMACPP_SLOTS = (1, 64)  # (llama-server's -np default, the most proposed)
API_SERVERS = (1, 16)  # (vLLM's --api-server-count default, the most proposed)
GPU_MEMORY_STEPS = (0.92, 0.95)
GPU_MEMORY_DEFAULT = 0.9
MIN_MODEL_LEN = 4096
COMPUTE_WHY = (
    "no flag helps: the GPU is busy; quantisation (INT8/AWQ), speculative decoding or more GPUs would"
)
CLIENT_WHY = "the load generator is the limit: add workers (the server was not measured at its limit)"

NP = ("-np", "--parallel")
CTX = ("-c", "--ctx-size")
CACHE_K = ("--cache-type-k", "-ctk")
CACHE_V = ("--cache-type-v", "-ctv")


@dataclass(frozen=True)
class Move:
    """The next flag to set (None: no flag helps), its value, why, and whether the loop stops."""

    flag: str | None
    value: str | None
    why: str
    stop: bool


def _stop(why: str) -> Move:
    return Move(None, None, why, True)


def _current(flags: Mapping[str, str], names: Sequence[str]) -> tuple[str, str | None]:
    """(the spelling the command uses, else the first of `names`; its value or None)."""
    for name in names:
        if name in flags:
            return name, flags[name]
    return names[0], None


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _fresh(flags: Mapping[str, str], tried: Sequence[Mapping[str, str]], flag: str, value: str) -> bool:
    """Whether `flags` with `flag` set to `value` is a flag set not measured yet (and a change)."""
    new = {**flags, flag: value}
    return new != dict(flags) and all(new != dict(t) for t in tried)


def next_move(
    family: str, flags: dict[str, str], bottleneck: str | None, *, tried: Sequence[dict[str, str]] = ()
) -> Move:
    """The next flag to change for `bottleneck` (a diagnosis kind) on a `family` ("vllm" | "llamacpp")
    server running with `flags` (the full flag set); see the module's docstring."""
    rules: dict[str, Callable[[str, dict[str, str], Sequence[dict[str, str]]], Move]] = {
        "max_num_seqs_cap": _sequence_cap,
        "kv_bound": _kv_bound,
        "frontend_bound": _front_end,
        "outside_engine": _front_end,
    }
    rule = rules.get(bottleneck or "")
    if rule is not None:
        return rule(family, flags, tried)
    if bottleneck in ("compute_bound", "gpu_busy"):
        return _stop(f"The server is compute-bound: {COMPUTE_WHY}.")
    if bottleneck == "client_bound":
        return _stop(f"The client is CPU-bound: {CLIENT_WHY}.")
    if bottleneck == "network_delay":
        return _stop(
            "Latency between the client and the server adds to every request: no server flag helps; "
            "run the load generator closer to the server."
        )
    if bottleneck == "no_saturation":
        return _stop(
            "The load never reached the server's ceiling: nothing holds it yet; raise the load (higher "
            "sweep stages or search bounds) before changing flags."
        )
    if bottleneck == "no_server_metrics":
        return _stop(
            "No server metrics were scraped, so the diagnosis cannot say what holds the server: no flag to follow."
        )
    found = "no bottleneck" if not bottleneck else f"the bottleneck {bottleneck!r}"
    return _stop(f"The diagnosis named {found}, which no server flag answers: stopping here.")


def _sequence_cap(family: str, flags: dict[str, str], tried: Sequence[dict[str, str]]) -> Move:
    """The scheduler's cap doubled (the seed's first move: 64 running, KV at 25%)."""
    if family == "llamacpp":
        flag, value = _current(flags, NP)
        default, most = LLAMACPP_SLOTS
        what = "llama-server's slots (-np)"
    else:
        flag, value = _current(flags, ("--max-num-seqs",))
        default, most = VLLM_MAX_NUM_SEQS
        what = "vLLM's --max-num-seqs"
    now = int(_number(value) or default)
    new = min(now * 2, most)
    if new <= now:
        return _stop(
            f"Requests are capped by {what}, already at {now}, the most this tune proposes: stopping."
        )
    if not _fresh(flags, tried, flag, str(new)):
        return _stop(f"Requests are capped by {what}; {flag} {new} was measured already: stopping.")
    return Move(
        flag,
        str(new),
        f"Running requests sat pinned at the cap while others waited and the KV cache had room: "
        f"{what} is the limit, so it goes from {now}{'' if value else ' (the default)'} to {new}.",
        False,
    )


def _kv_bound(family: str, flags: dict[str, str], tried: Sequence[dict[str, str]]) -> Move:
    """The first step of the KV cache's order (module docstring) not set and not measured yet."""
    for flag, value, why in _kv_steps(family, flags):
        if _fresh(flags, tried, flag, value):
            return Move(flag, value, f"The KV cache is full (preemptions, requests held back): {why}.", False)
    more = "a smaller model" if family == "llamacpp" else "more GPU memory (more GPUs, tensor parallel)"
    return _stop(
        "The KV cache is full and every flag that makes room for it was tried: "
        f"{more} or shorter prompts would help."
    )


def _kv_steps(family: str, flags: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(flag, value, why) in the order they are worth trying."""
    if family == "llamacpp":
        ctk, k = _current(flags, CACHE_K)
        ctv, v = _current(flags, CACHE_V)
        steps = [
            (ctk, "q8_0", "a q8_0 K cache holds about twice the tokens of f16 at a small quality cost"),
            (ctv, "q8_0", "a q8_0 V cache halves the rest (it needs flash attention, -fa)"),
            (ctk, "q4_0", "a q4_0 K cache halves it again (more quality cost)"),
            (ctv, "q4_0", "a q4_0 V cache halves it again"),
        ]
        order = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0")
        now = {ctk: k or "f16", ctv: v or "f16"}
        steps = [s for s in steps if order.index(s[1]) > _rank(order, now[s[0]])]
        c_flag, c = _current(flags, CTX)
        ctx = _number(c)
        if ctx:
            steps.append(
                (
                    c_flag,
                    str(int(ctx) * 2),
                    f"a larger KV cache (-c {int(ctx)} -> {int(ctx) * 2}) gives the slots more room",
                )
            )
        return steps
    util = _number(flags.get("--gpu-memory-utilization")) or GPU_MEMORY_DEFAULT
    steps = [
        (
            "--gpu-memory-utilization",
            f"{step:.2f}",
            f"more of the GPU's memory for the KV cache ({util:g} -> {step:.2f})",
        )
        for step in GPU_MEMORY_STEPS
        if step > util
    ]
    if not (flags.get("--kv-cache-dtype") or "auto").startswith("fp8"):
        steps.append(("--kv-cache-dtype", "fp8", "an fp8 KV cache holds twice the tokens of bf16"))
    length = _number(flags.get("--max-model-len"))
    if length and length / 2 >= MIN_MODEL_LEN:
        half = str(int(length // 2))
        steps.append(
            (
                "--max-model-len",
                half,
                f"a shorter context ({int(length)} -> {half}) lets more requests share the cache",
            )
        )
    return steps


def _rank(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else 0


def _front_end(family: str, flags: dict[str, str], tried: Sequence[dict[str, str]]) -> Move:
    """More API server processes (vLLM); llama-server has no such flag."""
    if family == "llamacpp":
        return _stop(
            "Requests wait outside llama-server's engine (its HTTP front-end, the network or the client): "
            "no llama-server flag widens that path."
        )
    default, most = API_SERVERS
    value = flags.get("--api-server-count")
    now = int(_number(value) or default)
    new = min(now * 2, most)
    if new <= now or not _fresh(flags, tried, "--api-server-count", str(new)):
        return _stop(
            f"Requests wait outside the engine and --api-server-count {new} was tried or is the most: stopping."
        )
    return Move(
        "--api-server-count",
        str(new),
        f"Requests wait outside the engine, in its API front-end: more API server processes ({now} -> {new}).",
        False,
    )
