"""The diagnosis held to injected causes: one short sweep per cause, and the confusion matrix of
what `swarm.analysis.diagnosis` named for each.

Each scenario runs `swarm run` (the embedded simulator, profile
benchmarks/profiles/diagnosis-matrix.toml) with ONE cause injected by a `swarm sim` flag, over
three stages of rising users:

  none        nothing injected, every stage below saturation
  frontend    --frontend-cost 2ms: one API-server lane spends 2 ms per SSE event
  kv          --kv-cache-tokens: a KV pool that holds ~5 of the requests
  seq_cap     --max-num-seqs 4
  compute     --token-cost-scale 10: each step's time grows with its batch
  network     --network-delay 100ms: every streamed write arrives 100 ms late
  client_cpu  the swarm's one worker pinned (taskset) to a core it shares with three busy loops,
              the simulator (instant profile) on the other core: the worker gets about a quarter
              of a core while it wants all of it (runnable > 90% of the time, ~70% of it
              waiting for the core): it never waits for a response, the server is ahead

The cause is checked to be physically there from what the simulator and the workers measured
(its trace, its /metrics as scraped, the workers' CPU) and from the kernel's scheduler
statistics of the worker's and the simulator's main threads (/proc/PID/task/PID/schedstat: time
on a CPU and time runnable but waiting for one, sampled by this harness), not from the
diagnosis: the `physics` column. Then the run directory is diagnosed afresh
(swarm.analysis.rundir.load_run + findings: today's rules) and the bottleneck kinds it named
are the matrix's columns; `--rediagnose DIR` does only that on the runs an earlier call left
in DIR (no new sweeps), to iterate on the rules.

With `--virtual`, the causes that live in the engine (none, kv, seq_cap, compute) are run on the
simulator's virtual clock instead (swarm/orchestrate/virtual_run.py: the same engine and flags, the
same run directory's files, in about a second each) and only the causes on the way to the user
(frontend, network, client_cpu) in real time; their physics leaves out the CPU (no client, no
simulator loop: nothing to starve) and says so.

  .venv/bin/python benchmarks/diagnosis_matrix.py [--out DIR] [--only kv,compute] [--virtual] [--json FILE]
  .venv/bin/python benchmarks/diagnosis_matrix.py --rediagnose DIR

Exit status: 0 when every cause is physically present and diagnosed as expected (its kind named,
trusted except client_bound, and no other bottleneck kind), 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from swarm.core.units import parse_duration

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import exit_on_termination, free_port, pin, started, wait_http

REPO = Path(__file__).resolve().parent.parent
PROFILE = str(REPO / "benchmarks" / "profiles" / "diagnosis-matrix.toml")
STAGE_S = 8
WARMUP_S = 2
KINDS = (
    "max_num_seqs_cap",
    "kv_bound",
    "compute_bound",
    "frontend_bound",
    "network_delay",
    "client_bound",
    "outside_engine",  # a ceiling the engine did not hold, no cause found: never the right answer here
)
UNTRUSTED_BY_DEFINITION = {"client_bound"}  # the finding that says the measurement itself is not trusted

# physics thresholds (what makes a cause unambiguous in a scenario's own measurements)
KV_FULL = 0.90
KV_ROOMY = 0.50
CPU_CALM = 70.0  # % of one core
STARVED = 0.90  # share of wall time a main thread was runnable (on a CPU or waiting for one)
ROOMY = 0.75  # a thread runnable less than this had time to spare
SAMPLE_S = 0.5
QPS_FLAT = 0.05  # growth under this between the last two stages: a plateau
QPS_GROWING = 0.20
FRONTEND_WAIT_MIN_S = 0.1  # the API server's queue at the top stage
DIRECT_WAIT_MAX_S = 0.005  # no front-end, no delay: first bytes out within this of the first token


@dataclass(frozen=True)
class Scenario:
    cause: str
    expected: str | None  # the bottleneck kind the diagnosis should name (None: none at all)
    sweep: tuple[int, ...]
    sim_args: tuple[str, ...] = ()
    input_tokens: str = "64"  # synthetic workload's --input-tokens / --output-tokens (N or MIN-MAX)
    output_tokens: str = "32"
    profile: str = PROFILE
    pinned: bool = False  # simulator on one core, the swarm (one worker) on another
    engine_only: bool = False  # the cause lives in the engine: --virtual runs it on the virtual clock
    hogs: int = 0  # busy loops sharing the worker's core
    what: str = ""


SCENARIOS = (
    Scenario("none", None, (2, 4, 8), engine_only=True, what="nothing injected, below saturation"),
    Scenario(
        "frontend",
        "frontend_bound",
        (2, 8, 16),
        ("--frontend-cost=2ms", "--api-server-count=1"),
        what="one API-server lane, 2 ms per SSE event (500 events/s)",
    ),
    Scenario(
        "kv",
        "kv_bound",
        (2, 8, 16),
        ("--kv-cache-tokens=1600", "--max-model-len=1024"),
        input_tokens="256",
        output_tokens="64",
        engine_only=True,
        what="a 100-block KV pool: ~5 requests of 20 blocks",
    ),
    Scenario(
        "seq_cap",
        "max_num_seqs_cap",
        (2, 8, 16),
        ("--max-num-seqs=4",),
        engine_only=True,
        what="max-num-seqs 4",
    ),
    Scenario(
        "compute",
        "compute_bound",
        (4, 16, 32),
        ("--token-cost-scale=10",),
        input_tokens="16",
        output_tokens="2-6",  # lengths that differ keep the users out of lockstep
        engine_only=True,
        what="10 ms per token in the batch on a 4 ms step: ~100 tok/s whatever the batch",
    ),
    Scenario(
        "network",
        "network_delay",
        (2, 4, 8),
        ("--network-delay=100ms",),
        what="every streamed write 100 ms late, below saturation",
    ),
    Scenario(
        "client_cpu",
        "client_bound",
        (4, 64, 128),
        input_tokens="16",
        output_tokens="16",
        profile="instant",
        pinned=True,
        hogs=3,
        what="one worker sharing its core with 3 busy loops; instant server on the other core",
    ),
)
BY_CAUSE = {s.cause: s for s in SCENARIOS}


# ---------------------------------------------------------------------------------------- runs


def _swarm_run_args(sc: Scenario, out: Path, stage_s: int, warmup_s: int, target: list[str]) -> list[str]:
    return [
        "run",
        *target,
        "--workers",
        "1",
        "--workload",
        "synthetic",
        "--sweep",
        ",".join(map(str, sc.sweep)),
        "--stage-time",
        f"{stage_s}s",
        "--warmup",
        f"{warmup_s}s",
        "--out",
        str(out),
        "--",
        "--input-tokens",
        sc.input_tokens,
        "--output-tokens",
        sc.output_tokens,
        "--seed",
        "1",
    ]


def run_scenario(sc: Scenario, out: Path, stage_s: int, warmup_s: int) -> None:
    """One sweep into `out` (a fresh directory): `swarm run`, its embedded simulator carrying the
    scenario's flags; pinned scenarios start `swarm sim` on its own core and point the run at it.
    The worker's and the simulator's scheduler statistics are sampled into out/schedstat.jsonl."""
    swarm = [sys.executable, "-m", "swarm"]
    timeout = len(sc.sweep) * stage_s + 120
    out.mkdir(parents=True)
    log = out / "swarm-run.log"
    with contextlib.ExitStack() as stack:
        stack.enter_context(sampling(out / SCHEDSTAT))
        if not sc.pinned:
            embedded = ["--sim-profile", sc.profile, *(f"--sim-arg={a}" for a in sc.sim_args)]
            _run([*swarm, *_swarm_run_args(sc, out, stage_s, warmup_s, embedded)], log, timeout)
            return
        port = free_port()
        sim_cmd = [*pin(1), *swarm, "sim", "--port", str(port), "--profile", sc.profile]
        sim_cmd += ["--trace", str(out / "sim-trace.jsonl"), *sc.sim_args]
        sim = stack.enter_context(started("sim", sim_cmd, out / "sim.log"))
        wait_http(f"http://127.0.0.1:{port}/health", sim)
        for i in range(sc.hogs):  # neighbours that never sleep, on the worker's core
            # each ends by itself after the run's time limit, should this harness be killed outright
            spin = f"import time\nend = time.monotonic() + {timeout}\nwhile time.monotonic() < end: pass"
            hog = [*pin(0), sys.executable, "-c", spin]
            stack.enter_context(started(f"hog-{i}", hog, out / f"hog-{i}.log"))
        host = ["--host", f"http://127.0.0.1:{port}"]
        _run([*pin(0), *swarm, *_swarm_run_args(sc, out, stage_s, warmup_s, host)], log, timeout)


def _tokens(spec: str) -> tuple[int, int]:
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


def run_virtual(sc: Scenario, out: Path, stage_s: int, warmup_s: int, seed: int = 1) -> None:
    """The scenario's sweep on the simulator's virtual clock, into `out` (a fresh directory): the
    engine `swarm sim --profile P FLAGS` would step, the synthetic load `run_scenario` sends."""
    from swarm.orchestrate.virtual_run import VirtualSweep, sim_profile, synthetic, write_sweep

    if (out / "summary.json").exists():
        raise ValueError(f"{out} already holds a run")
    request = synthetic(_tokens(sc.input_tokens), _tokens(sc.output_tokens))
    sweep = VirtualSweep(sc.sweep, stage_s, warmup_s, request, seed)
    write_sweep(out, sim_profile(sc.profile, sc.sim_args), sweep)


def _virtual(directory: Path) -> bool:
    """Whether the run in `directory` was written on the virtual clock (its summary says so)."""
    return json.loads((directory / "summary.json").read_text()).get("clock") == "virtual"


def _run(cmd: list[str], log: Path, timeout: float) -> None:
    with open(log, "wb") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, timeout=timeout, check=False)
    if p.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {p.returncode}; log {log}:\n{tail}")


# ---------------------------------------------------------------------------------------- scheduler

SCHEDSTAT = "schedstat.jsonl"
ROLES = {"worker": ("locust", "--worker"), "sim": ("swarm", "sim")}  # words of each one's command line


def _role(cmdline: Sequence[str]) -> str | None:
    for role, words in ROLES.items():
        if all(w in cmdline for w in words):
            return role
    return None


def _schedstat(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) of `pid`'s main thread."""
    try:
        run_ns, wait_ns, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None  # gone, or a kernel without schedstat
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


@contextlib.contextmanager
def sampling(path: Path) -> Iterator[None]:
    """Every SAMPLE_S, each worker's and simulator's main-thread schedstat among this harness's
    descendants, one JSON line each: {ts, role, pid, cpu_s, wait_s}."""
    import psutil

    stop = threading.Event()
    me = psutil.Process(os.getpid())

    def loop() -> None:
        roles: dict[int, str] = {}
        with open(path, "a") as f:
            while not stop.wait(SAMPLE_S):
                with contextlib.suppress(psutil.Error):
                    for child in me.children(recursive=True):
                        if child.pid not in roles:
                            with contextlib.suppress(psutil.Error):
                                role = _role(child.cmdline())
                                if role is not None:
                                    roles[child.pid] = role
                for pid, role in roles.items():
                    got = _schedstat(pid)
                    if got is not None:
                        line = {
                            "ts": time.time(),
                            "role": role,
                            "pid": pid,
                            "cpu_s": got[0],
                            "wait_s": got[1],
                        }
                        f.write(json.dumps(line) + "\n")
                f.flush()

    t = threading.Thread(target=loop, name="schedstat", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)


def runnable_share(lines: Sequence[dict[str, Any]], role: str, lo: float, hi: float) -> float | None:
    """The busiest `role` process's share of [lo, hi) spent runnable (on a CPU or in the run queue)."""
    best: float | None = None
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for d in lines:
        if d["role"] == role and lo <= d["ts"] < hi:
            by_pid.setdefault(d["pid"], []).append(d)
    for samples in by_pid.values():
        if len(samples) < 2:
            continue
        a, b = samples[0], samples[-1]
        wall = b["ts"] - a["ts"]
        share = ((b["cpu_s"] - a["cpu_s"]) + (b["wait_s"] - a["wait_s"])) / wall if wall > 0 else None
        if share is not None and (best is None or share > best):
            best = share
    return best


# ---------------------------------------------------------------------------------------- physics


@dataclass
class StagePhysics:
    """What one stage measured: the simulator's own trace and /metrics, the workers' CPU, and the
    worker's and simulator's main threads' scheduler statistics."""

    users: int | None
    qps: float | None
    running_max: float | None
    waiting_mean: float | None  # the gauge's mean over the window's scrapes (one a second)
    kv_max: float | None
    preemptions: float | None
    engine_ttft_p50_s: float | None  # the trace's first_token_time - arrival_time
    write_wait_p50_s: float | None  # first_write_time - first_token_time: front-end queue + network
    worker_cpu: float | None  # the busiest worker's mean % of a core (what the swarm measured)
    worker_runnable: float | None  # share of the stage its main thread was on a CPU or waiting for one
    sim_runnable: float | None  # the same for the simulator's
    # the engine's time-average queue over the window (Little's law on its own queue-time
    # histogram: mean wait x requests / window), exact where the scrapes only sample it
    queue_avg: float | None = None


def queue_average(s: Any) -> float | None:
    """Requests waiting on average over a stage window: vllm:request_queue_time_seconds' delta
    (mean x count) over the window's length (None without the histogram or a window)."""
    q = None if s is None else s.latency.get("queue")
    if not q or q.get("mean") is None or not q.get("count") or not s.duration_s:
        return None
    return float(q["mean"]) * float(q["count"]) / float(s.duration_s)


def _p50(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _trace(directory: Path) -> list[dict[str, Any]]:
    path = directory / "sim-trace.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stage_physics(directory: Path) -> list[StagePhysics]:
    from swarm.analysis.rundir import load_run

    data = load_run(directory)
    trace = [t for t in _trace(directory) if t.get("first_token_time") and t.get("first_write_time")]
    cpu = data.cpu.by_stage()
    sched_path = directory / SCHEDSTAT
    sched = [json.loads(x) for x in sched_path.read_text().splitlines()] if sched_path.exists() else []
    out = []
    for r in data.rows:
        lo = (r.start_s or 0.0) + r.warmup_s
        hi = r.end_s or float("inf")
        mine = [t for t in trace if lo <= t["arrival_time"] < hi]
        s = data.server.get(r.stage)
        out.append(
            StagePhysics(
                users=r.users,
                qps=r.qps,
                running_max=None if s is None else s.running_max,
                waiting_mean=None if s is None else s.waiting_mean,
                kv_max=None if s is None else s.kv_max,
                preemptions=None if s is None else s.preemptions,
                engine_ttft_p50_s=_p50([t["first_token_time"] - t["arrival_time"] for t in mine]),
                write_wait_p50_s=_p50([t["first_write_time"] - t["first_token_time"] for t in mine]),
                worker_cpu=cpu.get(r.stage),
                worker_runnable=runnable_share(sched, "worker", lo, hi),
                sim_runnable=runnable_share(sched, "sim", lo, hi),
                queue_avg=queue_average(s),
            )
        )
    return out


def _waiting(s: StagePhysics) -> float:
    return s.queue_avg if s.queue_avg is not None else (s.waiting_mean or 0.0)


def _growth(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a - 1.0


def _num_arg(sc: Scenario, flag: str) -> float:
    for a in sc.sim_args:
        if a.startswith(flag + "="):
            return float(a.split("=", 1)[1])
    raise KeyError(flag)


def _duration_arg(sc: Scenario, flag: str) -> float:
    for a in sc.sim_args:
        if a.startswith(flag + "="):
            return parse_duration(a.split("=", 1)[1], flag)
    raise KeyError(flag)


def physics_check(sc: Scenario, st: Sequence[StagePhysics], virtual: bool = False) -> list[str]:
    """Why the injected cause is NOT unambiguously there ([] when it is). `virtual`: a run on the
    virtual clock, where nothing can starve (no client, no simulator loop): the CPU is not judged."""
    if len(st) < 2:
        return [f"{len(st)} stage(s) measured"]
    top, prev = st[-1], st[-2]
    bad: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            bad.append(what)

    kv_roomy = all(s.kv_max is not None and s.kv_max < KV_ROOMY for s in st)
    # both sides had time to spare: neither the swarm's worker nor the simulator's loop starved
    cpu_calm = virtual or all(
        s.worker_cpu is not None
        and s.worker_cpu < CPU_CALM
        and s.worker_runnable is not None
        and s.worker_runnable < ROOMY
        and s.sim_runnable is not None
        and s.sim_runnable < ROOMY
        for s in st
    )
    calm = "worker CPU < 70%, worker and simulator runnable < 75% of the time"
    if virtual:
        calm = "(the virtual clock: no CPU to judge)"
    direct = all(s.write_wait_p50_s is not None and s.write_wait_p50_s < DIRECT_WAIT_MAX_S for s in st)
    # the engine kept up: what waits is the arrivals of the current step, not a queue of users held back
    # judged on the time-average: at 2 users the window holds 3 scrapes, and two that caught a
    # request in the few ms between its arrival and the next step read 0.67 "waiting" (2.5 ms
    # of queue a request, 0.03 on average); the scrapes' mean where the histogram is missing
    no_queue = all(_waiting(s) <= 0.25 * (s.users or 0) for s in st)
    growth = _growth(prev.qps, top.qps)
    if sc.cause in ("none", "network"):
        rising = all((_growth(a.qps, b.qps) or 0) > QPS_GROWING for a, b in itertools.pairwise(st))
        need(rising, "QPS grows > 20% at every step")
        need(kv_roomy and no_queue and cpu_calm, f"KV < 50%, waiting < 25% of the users, {calm}")
    if sc.cause == "none":
        need(direct, "first bytes out within 5 ms of the first token")
    if sc.cause == "network":
        delay = _duration_arg(sc, "--network-delay")
        need(
            all(s.write_wait_p50_s is not None and abs(s.write_wait_p50_s - delay) < 0.02 for s in st),
            f"first bytes out {delay * 1e3:.0f} ms (+-20) after the first token at every stage",
        )
    if sc.cause == "frontend":
        need(growth is not None and growth < QPS_FLAT, "QPS flat over the last step")
        need(
            top.write_wait_p50_s is not None and top.write_wait_p50_s > FRONTEND_WAIT_MIN_S,
            "the API server's queue > 100 ms at the top stage",
        )
        need(
            top.engine_ttft_p50_s is not None and top.engine_ttft_p50_s < 0.05,
            "engine TTFT p50 < 50 ms at the top stage",
        )
        need(kv_roomy and no_queue and cpu_calm, f"KV < 50%, waiting < 25% of the users, {calm}")
    if sc.cause == "seq_cap":
        cap = _num_arg(sc, "--max-num-seqs")
        need(top.running_max == cap and (top.waiting_mean or 0) >= 1, f"{cap:.0f} running with a queue")
        need(kv_roomy and cpu_calm, f"KV < 50%, {calm}")
    if sc.cause == "kv":
        need(
            top.kv_max is not None
            and top.kv_max > KV_FULL
            and ((top.preemptions or 0) > 0 or (top.waiting_mean or 0) >= 1),
            "KV > 90% with preemptions or a queue at the top stage",
        )
        need(cpu_calm, calm)
    if sc.cause == "compute":
        need(growth is not None and growth < QPS_FLAT, "QPS flat over the last step")
        # the batch grows with the users (nothing pins it); the arrivals of a long step wait for the next
        need(
            all(s.running_max is not None and s.running_max >= 0.75 * (s.users or 0) for s in st),
            "running >= 75% of the users at every stage",
        )
        need(kv_roomy and cpu_calm, f"KV < 50%, {calm}")
    if sc.cause == "client_cpu":
        need(
            top.worker_runnable is not None and top.worker_runnable > STARVED,
            "the worker's main thread runnable > 90% of the top stage",
        )
        # a main thread runnable all the time never waits for a response: the server was ahead. A
        # saturated worker still gains a little from more users (more responses per loop turn), so
        # its QPS is held to "far from following the users", not to flat
        need(growth is not None and growth < QPS_GROWING, "QPS grew < 20% over the last step")
    return bad


# ---------------------------------------------------------------------------------------- diagnosis


@dataclass
class Outcome:
    cause: str
    expected: str | None
    named: dict[str, bool] = field(default_factory=dict)  # bottleneck kind -> trusted
    findings: list[dict[str, Any]] = field(default_factory=list)
    physics: list[dict[str, Any]] = field(default_factory=list)
    physics_problems: list[str] = field(default_factory=list)
    directory: str = ""
    error: str | None = None
    clock: str = "real"  # or "virtual": the simulator's engine on its virtual clock (--virtual)

    @property
    def diagnosed(self) -> bool:
        """The expected kind named (trusted, unless it is the untrusted-measurement finding) and
        no other bottleneck kind; with nothing injected, no bottleneck kind at all."""
        if self.error is not None:
            return False
        if self.expected is None:
            return not self.named
        trusted_ok = self.named.get(self.expected) == (self.expected not in UNTRUSTED_BY_DEFINITION)
        return self.expected in self.named and trusted_ok and set(self.named) == {self.expected}

    @property
    def physical(self) -> bool:
        return self.error is None and not self.physics_problems


def diagnose(sc: Scenario, directory: Path, virtual: bool = False) -> Outcome:
    from swarm.analysis.rundir import findings, load_run

    found = findings(load_run(directory))
    named: dict[str, bool] = {}
    for f in found:
        if f.kind in KINDS:
            named[f.kind] = named.get(f.kind, True) and f.trusted
    st = stage_physics(directory)
    return Outcome(
        sc.cause,
        sc.expected,
        named,
        [{"kind": f.kind, "stage": f.stage, "trusted": f.trusted, "text": f.text} for f in found],
        [asdict(s) for s in st],
        physics_check(sc, st, virtual),
        str(directory),
        clock="virtual" if virtual else "real",
    )


# ---------------------------------------------------------------------------------------- output


def _cell(o: Outcome, kind: str | None) -> str:
    if o.error is not None:
        return "error"
    if kind is None:
        mark = "x" if not o.named else "."
    elif kind in o.named:
        mark = "x" if o.named[kind] else "x?"
    else:
        mark = "."
    want = kind == o.expected
    return f"[{mark}]" if want else mark


def matrix_text(outcomes: Sequence[Outcome]) -> str:
    """Rows: injected cause; columns: bottleneck kinds named (x trusted, x? untrusted, [ ] expected)."""
    cols = [*KINDS, None]
    names = [k or "none" for k in cols]
    corner = "injected / named"
    w0 = max(len(corner), *(len(o.cause) for o in outcomes))
    widths = [max(len(n), 5) for n in names]
    head = "  ".join([f"{corner:<{w0}}", *(f"{n:^{w}}" for n, w in zip(names, widths, strict=True))])
    lines = [head + "  physics  diagnosis", "-" * (len(head) + 21)]
    for o in outcomes:
        cells = [f"{_cell(o, k):^{w}}" for k, w in zip(cols, widths, strict=True)]
        phys = "ok" if o.physical else "NOT OK"
        diag = "ok" if o.diagnosed else "WRONG"
        lines.append("  ".join([f"{o.cause:<{w0}}", *cells]) + f"  {phys:<7}  {diag}")
    lines.append("x named (trusted), x? named untrusted, [ ] the expected cell, . not named")
    return "\n".join(lines)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.0f}ms"


def details_text(outcomes: Sequence[Outcome]) -> str:
    out = []
    for o in outcomes:
        sc = BY_CAUSE[o.cause]
        clock = ", the virtual clock" if o.clock == "virtual" else ""
        out.append(f"\n{o.cause}: {sc.what} ({o.directory}{clock})")
        if o.error is not None:
            out.append(f"  ERROR: {o.error}")
            continue
        out.append(
            "  users    QPS  running max  waiting (avg)  KV max  preempt  engine TTFT p50  write wait p50  "
            "worker CPU  runnable: worker  sim"
        )
        for s in o.physics:
            out.append(
                f"  {s['users'] or '-':>5}  {_f(s['qps'], 1):>5}  {_f(s['running_max'], 0):>11}  "
                f"{_f(s['waiting_mean'], 1):>7} ({_f(s.get('queue_avg'), 2):>4})  {_pct(s['kv_max']):>6}  {_f(s['preemptions'], 0):>7}  "
                f"{_ms(s['engine_ttft_p50_s']):>15}  {_ms(s['write_wait_p50_s']):>14}  "
                f"{_f(s['worker_cpu'], 0):>9}%  {_pct(s['worker_runnable']):>16}  {_pct(s['sim_runnable']):>4}"
            )
        if o.physics_problems:
            out.append("  physics NOT as injected: " + "; ".join(o.physics_problems))
        for f in o.findings:
            if f["kind"] in KINDS or f["kind"] in ("saturation", "no_saturation", "client_vs_server"):
                trust = "" if f["trusted"] else " (untrusted)"
                out.append(f"  - {f['kind']}{trust}: {f['text']}")
    return "\n".join(out)


def _f(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


# ---------------------------------------------------------------------------------------- main


class BadInput(Exception):
    """A bad option: one line on stderr, exit 2."""


def _causes(text: str | None) -> list[str]:
    if not text:
        return [s.cause for s in SCENARIOS]
    causes = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in causes if c not in BY_CAUSE]
    if unknown or not causes:
        raise BadInput(f"--only {text!r}: causes are {', '.join(BY_CAUSE)}")
    return causes


def each(causes: Sequence[str], act: Callable[[Scenario], Outcome]) -> Iterator[Outcome]:
    for cause in causes:
        sc = BY_CAUSE[cause]
        t0 = time.monotonic()
        try:
            o = act(sc)
        except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as e:
            o = Outcome(sc.cause, sc.expected, error=str(e).splitlines()[0] if str(e) else type(e).__name__)
        print(
            f"diagnosis_matrix: {cause}: named {sorted(o.named) or 'nothing'} "
            f"({time.monotonic() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        yield o


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out", help="run directories go here, one per cause (default: runs/diagnosis-matrix-<UTC time>)"
    )
    p.add_argument("--only", help=f"comma list of causes ({', '.join(BY_CAUSE)}); default: all")
    p.add_argument("--stage-time", type=int, default=STAGE_S, help=f"seconds per stage (default {STAGE_S})")
    p.add_argument(
        "--warmup",
        type=int,
        default=WARMUP_S,
        help=f"seconds of each stage not measured (default {WARMUP_S})",
    )
    p.add_argument(
        "--virtual",
        action="store_true",
        help="run the causes that live in the engine (none, kv, seq_cap, compute) on the simulator's "
        "virtual clock, in seconds; the others in real time",
    )
    p.add_argument("--rediagnose", metavar="DIR", help="diagnose the runs already in DIR, run nothing")
    p.add_argument("--json", metavar="FILE", help="also write the outcomes as JSON")
    args = p.parse_args(argv)
    try:
        return _main(args)
    except BadInput as e:
        print(f"diagnosis_matrix: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    causes = _causes(args.only)
    if args.stage_time <= args.warmup or args.warmup < 0:
        raise BadInput("--stage-time must exceed --warmup (seconds)")
    exit_on_termination()
    if args.rediagnose:
        root = Path(args.rediagnose)
        missing = [c for c in causes if not (root / c / "summary.json").exists()]
        if missing:
            raise BadInput(f"no run of {', '.join(missing)} under {root}")
        outcomes = list(each(causes, lambda sc: diagnose(sc, root / sc.cause, _virtual(root / sc.cause))))
    else:
        root = Path(args.out or time.strftime("runs/diagnosis-matrix-%Y%m%d-%H%M%S", time.gmtime()))
        print(f"diagnosis_matrix: runs in {root}", file=sys.stderr, flush=True)
        taken = [c for c in causes if (root / c).exists()]
        if taken:
            raise BadInput(f"{root} already holds {', '.join(taken)}: give a new --out")

        def act(sc: Scenario) -> Outcome:
            if args.virtual and sc.engine_only:
                run_virtual(sc, root / sc.cause, args.stage_time, args.warmup)
                return diagnose(sc, root / sc.cause, virtual=True)
            run_scenario(sc, root / sc.cause, args.stage_time, args.warmup)
            return diagnose(sc, root / sc.cause)

        outcomes = list(each(causes, act))
    print(matrix_text(outcomes))
    print(details_text(outcomes))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [{**asdict(o), "diagnosed": o.diagnosed, "physical": o.physical} for o in outcomes],
                indent=2,
            )
            + "\n"
        )
    return 0 if all(o.diagnosed and o.physical for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
