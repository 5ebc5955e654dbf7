"""`swarm sim`: run the simulated LLM server (a vLLM, llama.cpp, SGLang, TGI, TensorRT-LLM or
Ollama face: swarm/sim/faces.py).

Only argparse and the profile loader are imported at parse time; aiohttp and the server come
in `main`, and nothing here imports Locust/gevent.
"""

from __future__ import annotations

import argparse
import math

from swarm.core.errors import UsageError
from swarm.core.units import parse_duration
from swarm.sim import engine_flags
from swarm.sim.profile import REASONING_FIELDS, bundled_profiles


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument(
        "--model",
        action="append",
        metavar="NAME[,NAME]",
        help="served model name; repeat it or give a comma list to serve several, the first as the base "
        "and the others as its LoRA adapters, one engine for all (default: sim-model)",
    )
    parser.add_argument(
        "--profile",
        default="instant",
        help=f"bundled profile ({', '.join(bundled_profiles())}) or a path to your own .toml (default: instant)",
    )
    parser.add_argument(
        "--server",
        default="vllm",
        metavar="NAME",
        help="the server it speaks as (a face of swarm/sim/faces.py): vllm (default), llamacpp "
        "(llama-server's events, errors, /metrics, /tokenize, /detokenize and /apply-template; "
        "--max-num-seqs is its --parallel slot count and --max-model-len each slot's context), "
        "sglang (sglang: /metrics, owned_by sglang, top-level error objects), tgi (TGI's tgi_ /metrics, "
        "string errors, usage only at the end, /info), trtllm (trtllm-serve: trtllm_ metrics at "
        "/prometheus/metrics, usage on by default) or ollama (no /metrics, delta.reasoning, a separate "
        "finish chunk)",
    )
    g = parser.add_argument_group("engine (override the profile)")
    g.add_argument("--max-num-seqs", type=int, help="most sequences running at once")
    g.add_argument("--max-num-batched-tokens", type=int, help="token budget of one step (chunked prefill)")
    g.add_argument("--kv-cache-tokens", type=int, help="KV-cache capacity in tokens")
    g.add_argument("--max-model-len", type=int, help="context length (prompt + output)")
    g.add_argument("--block-size", type=int, help="KV block size in tokens")
    g.add_argument("--no-prefix-caching", action="store_true", help="turn prefix caching off")
    engine_flags.configure(parser)
    d = parser.add_argument_group("dialect (override the profile)")
    d.add_argument("--reasoning-field", choices=REASONING_FIELDS, help="delta field of reasoning tokens")
    d.add_argument("--thinking-default", choices=("on", "off"), help="thinking when a request does not say")
    d.add_argument(
        "--merge-reasoning",
        action="store_true",
        help="send no chunk for empty-text tokens; the next chunk carries them (vLLM reasoning parser)",
    )
    d.add_argument("--utf8-split", type=float, metavar="RATE", help="share of tokens sent with empty text")
    d.add_argument(
        "--enable-prompt-tokens-details",
        action="store_true",
        help="as vLLM's flag: the final usage carries prompt_tokens_details.cached_tokens, the request's "
        "prefix-cache hit (the llama.cpp face always sends it)",
    )
    b = parser.add_argument_group("injected bottlenecks (for proving a diagnosis)")
    b.add_argument(
        "--token-cost-scale",
        type=float,
        metavar="X",
        help="multiply the profile's per-token step costs (decode, prefill, KV read), not its fixed "
        "per-step cost: a GPU X times slower at batched work, so throughput stops growing with the "
        "batch (compute-bound)",
    )
    b.add_argument(
        "--frontend-cost",
        default="0",
        metavar="DURATION",
        help="the API server's CPU time per streamed SSE event (e.g. 2ms, 500us), paid one event at a "
        "time on one of --api-server-count lanes; delays what clients see, not the engine's clocks "
        "(default: 0)",
    )
    b.add_argument(
        "--api-server-count",
        type=int,
        default=1,
        metavar="K",
        help="API server processes the front-end cost is spread over, requests round-robin (default: 1)",
    )
    b.add_argument(
        "--network-delay",
        default="0",
        metavar="DURATION",
        help="each streamed write leaves this long after the engine produced it (e.g. 100ms): constant "
        "latency, order kept, no throughput limit (default: 0)",
    )
    f = parser.add_argument_group("faults and ground truth")
    f.add_argument(
        "--fault",
        action="append",
        metavar="KIND=RATE",
        help="inject a fault (repeatable): http_400 http_429 http_500 http_503 stream_error cut stall bad_chunk",
    )
    f.add_argument(
        "--stall",
        default="5s",
        metavar="DURATION",
        help="length of a stall fault, e.g. 5s, 500ms (a bare number: seconds; default: 5s)",
    )
    f.add_argument("--stall-s", dest="stall", help=argparse.SUPPRESS)  # the old spelling, kept working
    f.add_argument("--api-key", help="answer 401 to /v1 requests without 'Authorization: Bearer KEY'")
    f.add_argument("--trace", metavar="FILE", help="write one JSON line per request (ground truth)")
    f.add_argument("--seed", type=int, default=0, help="seed for lengths, text and faults (default: 0)")


def served_models(given: list[str] | None) -> tuple[str, ...]:
    """`--model a --model b` / `--model a,b` -> ("a", "b"); none -> ("sim-model",). UsageError on
    an empty or repeated name."""
    if not given:
        return ("sim-model",)
    names: list[str] = []
    for item in given:
        for name in item.split(","):
            name = name.strip()
            if not name:
                raise UsageError(f"--model {item!r}: an empty model name; use e.g. --model base,my-lora")
            if name in names:
                raise UsageError(f"--model: {name!r} is given twice")
            names.append(name)
    return tuple(names)


def build_config(args: argparse.Namespace):  # -> SimConfig (import kept lazy)
    from swarm.sim.faces import get_face
    from swarm.sim.faults import FaultPlan
    from swarm.sim.profile import load_profile
    from swarm.sim.server import SimConfig

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be in 0..65535")
    for flag in ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len", "block_size"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise UsageError(f"--{flag.replace('_', '-')} {v}: must be a positive integer")
    if args.utf8_split is not None and not (0.0 <= args.utf8_split < 1.0 and math.isfinite(args.utf8_split)):
        raise UsageError(f"--utf8-split {args.utf8_split}: must be in [0, 1), e.g. 0.3")
    if args.token_cost_scale is not None and not (
        args.token_cost_scale > 0 and math.isfinite(args.token_cost_scale)
    ):
        raise UsageError(f"--token-cost-scale {args.token_cost_scale}: must be a positive number, e.g. 8")
    frontend_s_per_chunk = parse_duration(args.frontend_cost, "--frontend-cost")
    network_delay_s = parse_duration(args.network_delay, "--network-delay")
    if args.api_server_count < 1:
        raise UsageError(f"--api-server-count {args.api_server_count}: must be a positive integer")
    face = get_face(args.server)  # the registry's names are checked here: faces.py is not light to import
    reasoning_field = args.reasoning_field or face.reasoning_field
    profile = load_profile(args.profile)
    profile = profile.with_overrides(
        **engine_flags.engine_overrides(args, face.name, profile),
        reasoning_field=reasoning_field,
        thinking_default=None if args.thinking_default is None else args.thinking_default == "on",
        merge_reasoning=True if args.merge_reasoning else None,
        utf8_split=args.utf8_split,
    )
    if args.token_cost_scale is not None:
        profile = profile.with_overrides(step=profile.step.token_costs_scaled(args.token_cost_scale))
    models = served_models(args.model)
    if face.one_model and len(models) > 1:
        raise UsageError(f"--server {face.name} serves one model ({face.one_model}); give one --model")
    if args.api_key is not None and not args.api_key:
        raise UsageError("--api-key: must not be empty")
    return SimConfig(
        profile=profile,
        model=models[0],
        models=models,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        faults=FaultPlan.from_specs(args.fault, parse_duration(args.stall, "--stall")),
        trace_path=args.trace,
        seed=args.seed,
        server=args.server,
        prompt_tokens_details=args.enable_prompt_tokens_details,
        frontend_s_per_chunk=frontend_s_per_chunk,
        api_server_count=args.api_server_count,
        network_delay_s=network_delay_s,
    )


def main(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from swarm.sim.server import serve

    cfg = build_config(args)
    if cfg.trace_path:  # the server appends to it; a path it cannot write is said as such, not as a port
        from swarm.sim.trace import TraceWriter

        try:
            TraceWriter(cfg.trace_path).close()
        except OSError as e:
            raise UsageError(f"--trace {cfg.trace_path}: cannot write it ({e.strerror or e})") from None

    async def run() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        ready = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        task = asyncio.create_task(serve(cfg, ready=ready, stop=stop))
        ready_or_done = asyncio.create_task(ready.wait())
        await asyncio.wait({task, ready_or_done}, return_when=asyncio.FIRST_COMPLETED)
        if ready.is_set():
            p = cfg.profile
            print(
                f"swarm sim: serving {', '.join(map(repr, cfg.models))} (profile {p.name}, max_model_len {p.max_model_len}) "
                f"on http://{cfg.host}:{cfg.port}",
                flush=True,
            )
        else:
            ready_or_done.cancel()
        await task

    try:
        asyncio.run(run())
    except OSError as e:
        raise UsageError(f"cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}") from None
    return 0
