"""Building blocks of `benchmarks/run.py`: pinned processes, CPU/RSS sampling, the simulator,
a Locust master + workers running the swarm, the request shape, and trace matching.

Every process is started in its own session and stopped by its process group id when its
context exits, so an interrupted benchmark leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROMPT_TOKENS = 64
OUTPUT_TOKENS = 64
SIM_MODEL = "sim-model"
CPU_LIMIT = 90.0  # percent of one core: above it a client measures its own queueing


def exit_on_termination() -> None:
    """SIGTERM / SIGHUP (a `timeout`, a closed terminal, make stopped) end the harness as Ctrl-C
    does: with an exception, so every `started` context stops its process group on the way out
    (the default action would kill the harness alone and leave the simulator running)."""

    def leave(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pin(core: int | None) -> list[str]:
    """`taskset -c CORE` when there is such a core and taskset exists; else nothing."""
    if core is None or not shutil.which("taskset") or cores() <= core:
        return []
    return ["taskset", "-c", str(core)]


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def busiest_processes(n: int = 5) -> list[str]:
    """The `n` processes using the most CPU right now (over 0.5 s), as 'pid name cpu%'."""
    import psutil

    procs = list(psutil.process_iter(["pid", "name"]))
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.cpu_percent(None)
    time.sleep(0.5)
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            out.append((p.cpu_percent(None), p.info["pid"], p.info["name"]))
    out.sort(reverse=True)
    return [f"{pid} {name} {cpu:.0f}%" for cpu, pid, name in out[:n]]


# -- processes --------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self, grace_s: float = 10.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)


@contextlib.contextmanager
def started(
    name: str, cmd: Sequence[str], log: Path, env: dict[str, str] | None = None, cwd: Path = REPO
) -> Iterator[Proc]:
    """`cmd` in its own process group (taskset execs the program: same pid); stopped on exit."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("OPENAI_API_KEY", None)
    with open(log, "wb") as out:
        p = subprocess.Popen(
            list(cmd), stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=cwd, start_new_session=True
        )
    proc = Proc(name, p, log)
    try:
        yield proc
    finally:
        proc.stop()


def wait_http(url: str, proc: Proc, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{proc.name}: {url} did not answer in {timeout_s:g} s; log tail:\n{proc.tail()}")


# -- sampling ---------------------------------------------------------------------------------


@dataclass
class Sample:
    wall: float  # time.time()
    mono: float  # time.perf_counter() (CLOCK_MONOTONIC: the same clock in every process here)
    cpu_s: float  # user + system CPU seconds of the process so far
    rss: int  # bytes


class Sampler:
    """Samples processes' CPU time and RSS every `interval_s` in a thread of this process."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, list[Sample]] = {}
        self._procs: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._lock = threading.Lock()

    def watch(self, name: str, pid: int) -> None:
        import psutil

        with self._lock:
            self._procs[name] = psutil.Process(pid)
            self.samples.setdefault(name, [])
        self._take(name)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _take(self, name: str) -> None:
        import psutil

        proc = self._procs.get(name)
        if proc is None:
            return
        try:
            with proc.oneshot():
                t = proc.cpu_times()
                rss = proc.memory_info().rss
        except psutil.Error:
            with self._lock:
                self._procs.pop(name, None)
            return
        self.samples[name].append(Sample(time.time(), time.perf_counter(), t.user + t.system, rss))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                names = list(self._procs)
            for name in names:
                self._take(name)

    def cpu_percent(self, name: str, start: float, end: float, clock: str = "wall") -> float | None:
        """Mean CPU % of one core between `start` and `end` (samples nearest inside the window)."""
        inside = [s for s in self.samples.get(name, []) if start <= getattr(s, clock) <= end]
        if len(inside) < 2:
            return None
        a, b = inside[0], inside[-1]
        dt = getattr(b, clock) - getattr(a, clock)
        return 100.0 * (b.cpu_s - a.cpu_s) / dt if dt > 0 else None

    def rss(self, name: str) -> list[tuple[float, int]]:
        return [(s.wall, s.rss) for s in self.samples.get(name, [])]


# -- the request shape ------------------------------------------------------------------------


def write_prompts(path: Path, n: int = 2000, tokens: int = PROMPT_TOKENS) -> Path:
    """A prompt file for the `custom` workload: `n` distinct chat prompts of exactly `tokens`
    prompt tokens as the simulator counts them (template included), max_tokens OUTPUT_TOKENS."""
    from swarm.core.tokens import count_chat_tokens

    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "load",
        "test",
        "swarm",
        "measure",
        "token",
        "latency",
        "stream",
        "chunk",
        "server",
        "client",
    ]
    rng = random.Random(9)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for i in range(n):
            text = f"Request {i}:"

            def size(t: str) -> int:
                return count_chat_tokens([{"role": "user", "content": t}])

            while size(text + " x") < tokens:
                text += " " + rng.choice(words)
            while size(text) < tokens:
                text += "."
            while size(text) > tokens:
                text = text[:-1]
            f.write(json.dumps({"prompt": text, "max_tokens": OUTPUT_TOKENS}) + "\n")
    return path


# -- the simulator and the swarm --------------------------------------------------------------


@contextlib.contextmanager
def simulator(
    out: Path, core: int | None, trace: bool = True, name: str = "sim"
) -> Iterator[tuple[str, Proc]]:
    port = free_port()
    cmd = [
        *pin(core),
        sys.executable,
        "-m",
        "swarm",
        "sim",
        "--profile",
        "instant",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--model",
        SIM_MODEL,
    ]
    if trace:
        cmd += ["--trace", str(out / f"{name}-trace.jsonl")]
    with started(name, cmd, out / f"{name}.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", proc)
        yield url, proc


@dataclass
class SwarmRun:
    """A Locust master + N workers running the swarm's LLMUser (what `swarm run` starts)."""

    out: Path
    host: str
    prompts: Path
    workers: int = 1
    users: int = 1
    run_time_s: float | None = None  # plain run; else stages
    sweep: list[int] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    stage_time_s: int = 10
    warmup_s: int = 2
    master_core: int | None = 0
    worker_cores: list[int | None] = field(default_factory=lambda: [1])
    code: Path | None = None  # run the swarm package from this directory (before/after comparisons)

    def _env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.code)} if self.code else {}

    def _cwd(self) -> Path:
        return self.out if self.code else REPO

    def _locustfile(self) -> str:
        return str((self.code or REPO) / "swarm" / "locustfile.py")

    def _common(self) -> list[str]:
        return [
            "--host",
            self.host,
            "--workload",
            "custom",
            "--prompt-file",
            str(self.prompts.resolve()),
            "--max-tokens",
            str(OUTPUT_TOKENS),
            "--ignore-eos",
            "--swarm-out",
            str(self.out.resolve()),
            "--run-id",
            self.out.name,
        ]

    def expected_s(self) -> float:
        stages = len(self.sweep) or len(self.rates)
        return stages * self.stage_time_s if stages else float(self.run_time_s or 0)

    @contextlib.contextmanager
    def start(self, sampler: Sampler) -> Iterator[tuple[Proc, list[Proc]]]:
        self.out.mkdir(parents=True, exist_ok=True)
        port = free_port()
        cmd = [
            *pin(self.master_core),
            sys.executable,
            "-m",
            "locust",
            "-f",
            self._locustfile(),
            "--master",
            "--headless",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(self.workers),
            "--expect-workers-max-wait",
            "30",
            "-u",
            str(max(self.users, max(self.sweep, default=0))),
            "-r",
            "10000",
            "--stop-timeout",
            "10s",
            "--only-summary",
            *self._common(),
        ]
        if self.sweep:
            cmd += ["--sweep", ",".join(map(str, self.sweep))]
        elif self.rates:
            cmd += ["--rate", ",".join(f"{r:g}" for r in self.rates), "--arrivals", "poisson"]
        if self.sweep or self.rates:
            cmd += ["--stage-time", f"{self.stage_time_s}s", "--warmup", f"{self.warmup_s}s"]
        else:
            cmd += ["-t", f"{self.run_time_s:g}s"]
        with contextlib.ExitStack() as stack:
            master = stack.enter_context(
                started("master", cmd, self.out / "master.log", self._env(), self._cwd())
            )
            workers = []
            for i in range(self.workers):
                core = self.worker_cores[i] if i < len(self.worker_cores) else None
                wcmd = [
                    *pin(core),
                    sys.executable,
                    "-m",
                    "locust",
                    "-f",
                    self._locustfile(),
                    "--worker",
                    "--master-host",
                    "127.0.0.1",
                    "--master-port",
                    str(port),
                    *self._common(),
                ]
                w = stack.enter_context(
                    started(f"worker-{i}", wcmd, self.out / f"worker-{i}.log", self._env(), self._cwd())
                )
                sampler.watch(w.name, w.pid)
                workers.append(w)
            sampler.watch("master", master.pid)
            yield master, workers

    def run(self, sampler: Sampler) -> dict[str, Any]:
        """Run to the end; returns summary.json."""
        with self.start(sampler) as (master, _workers):
            try:
                master.popen.wait(timeout=self.expected_s() + 90)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"master did not finish; log tail:\n{master.tail()}") from None
        path = self.out / "summary.json"
        if not path.exists():
            raise RuntimeError(f"no summary.json; master log tail:\n{master.tail()}")
        return json.loads(path.read_text())


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every request record the workers wrote under `out`/records (Parquet parts)."""
    from swarm.core import recordfile as recorder

    table = recorder.read_table(out / "records")
    cols = ["request_id", "start_wall_s", "ttft_s", "e2e_s", "output_tokens", "outcome", "stage", "warmup"]
    return table.select(cols).to_pylist()


def read_trace(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    with open(path, "rb") as f:
        for line in f:
            t = json.loads(line)
            out[t["id"]] = t
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank-lower percentile (as swarm.stats.quantiles): None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1)))]
