"""Ten thousand open streams in one worker process.

    .venv/bin/python benchmarks/streams_10k.py                    # `make bench-scale`, ~3 min
    .venv/bin/python benchmarks/streams_10k.py --streams 2000     # smaller
    .venv/bin/python benchmarks/streams_10k.py --open-loop --streams 5000   # send lag, ~3 min
    .venv/bin/python benchmarks/streams_10k.py --open-loop --sims 2 --step-s 2   # at 10,000, ~3 min

`--sims N` simulators (default one; the swarm spreads its users over them, `--host A,B`) with
benchmarks/profiles/slow-decode.toml (a token per second for every running sequence, up to 16,384
of them; `--step-s 2`: a token every 2 s) on core 0 beside the master, and ONE Locust worker on
core 1 with
`--streams` users in closed loop, each streaming 12-token answers back to back: about `--streams`
streams open at every moment. Measured over a steady window after the first burst (the run goes
on until the window's streams have ended, so every one of them is recorded): streams open (from
the records, each second, and the simulator's running requests), the worker's RSS per open
stream (peak in the window minus the worker's at its first request, loaded), CPU per chunk (CPU seconds /
token chunks received in the window), and the TTFT error against the simulator's trace (the
client's first-token time - the server's first-token write, per request id, for first tokens in
the window). Closed loop has no schedule, so no send lag there.

`--open-loop` measures the send lag at that concurrency: Poisson arrivals at `--streams` /
(answer length in seconds) requests/s, so that about `--streams` streams are open in the steady
window, with 30% more users than that as the in-flight cap; each request's `send_lag_s` (how late
it left against its schedule) in the window gives p50/p99/max, and the cap must never be reached
(else the lag would be the cap's, not the worker's).

Before the run: the file-descriptor limit is raised to its hard limit and the ephemeral port
range checked; when either cannot hold the streams (plus a margin), one line says so and the
benchmark exits 2 instead of failing with connect errors half-way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import resource
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

REPO = harness.REPO
PROFILE = REPO / "benchmarks/profiles/slow-decode.toml"
TOKENS = 12  # output tokens per stream (--max-tokens, --ignore-eos)
STEP_S = 1.0  # the profile's step: one token per stream per second (--step-s changes it)
FD_MARGIN = 1024  # files, pipes and sockets beside the streams


def log(msg: str) -> None:
    print(f"[streams {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def check_limits(streams: int, sockets: int | None = None) -> str | None:
    """Raise RLIMIT_NOFILE to the hard limit (children inherit it); None when the streams fit,
    else the one-line reason they cannot. `sockets`: what the worker may hold open (default
    `streams`): its requests in flight at most, an open loop's users (its in-flight cap), however
    many simulators they go to (one pool per origin, shared by the users: swarm/client/shared_pool.py)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = (sockets or streams) + FD_MARGIN
    if soft < need:
        target = hard if hard == resource.RLIM_INFINITY else min(hard, max(need, soft))
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < need:
        return (
            f"open-file limit {soft} < {need} ({sockets or streams} sockets + {FD_MARGIN}); the hard limit is {hard}: "
            f"raise it (ulimit -Hn / limits.conf / systemd LimitNOFILE) or run fewer --streams"
        )
    with contextlib.suppress(OSError):
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        if high - low + 1 < streams:
            return (
                f"ephemeral ports {low}-{high} ({high - low + 1}) < {streams} streams to one server address: "
                f"widen net.ipv4.ip_local_port_range or run fewer --streams"
            )
    return None


# The worker's locustfile: the swarm's, and a `gc.callbacks` probe that keeps each collection's
# pause (wall clock at its end, milliseconds, generation), and once a second the interpreter's
# allocated blocks with the requests in flight; both written at the process's quit.
GC_PROBE = """
import gc, json, os, sys, time
import gevent
from locust import events
from swarm.locustfile import *  # noqa: F401,F403
from swarm.live.state import swarm_state

_PAUSES, _START, _HEAP = [], [0.0], []

@events.init.add_listener
def _heap_sampler(environment, **_):
    def sample():
        while True:
            gevent.sleep(1.0)
            _HEAP.append((time.time(), sys.getallocatedblocks(), swarm_state(environment).in_flight))
    gevent.spawn(sample)

def _probe(phase, info):
    if phase == "start":
        _START[0] = time.perf_counter()
    else:
        _PAUSES.append((time.time(), (time.perf_counter() - _START[0]) * 1000, info["generation"]))

gc.callbacks.append(_probe)

@events.quitting.add_listener
def _write(**_):
    with open(os.path.join(os.path.dirname(__file__), f"gc-{os.getpid()}.json"), "w") as f:
        json.dump(_PAUSES, f)
    with open(os.path.join(os.path.dirname(__file__), f"heap-{os.getpid()}.json"), "w") as f:
        json.dump(_HEAP, f)
"""


class StreamRun(harness.SwarmRun):
    """`make bench`'s master + worker, with TOKENS-token answers; the worker's GC pauses probed."""

    def _common(self) -> list[str]:
        common = super()._common()
        common[common.index("--max-tokens") + 1] = str(TOKENS)
        # no over-saturation stop: the one simulator's steps slow a little as its batch fills (1.09 s
        # for 1 s at 5,000), the backlog creeps up for a minute and the guard ended the stage at
        # 37 s ("requests waiting grew 5362 -> 5534 over 20 s"); this measures the worker, not it
        return [*common, "--saturation-guard", "0"]

    def _locustfile(self) -> str:
        probe = self.out / "gc_probe_locustfile.py"
        self.out.mkdir(parents=True, exist_ok=True)
        probe.write_text(GC_PROBE)
        return str(probe)


BURST_BIN_S = 0.05  # the window cut in bins of this; a bin receiving more chunks than the mean is a burst
BURST_AFTER_S = 0.1  # ... and the loop is still catching up this long after one


def lag_in_bursts(
    chunks_at: np.ndarray, rows: list[dict[str, Any]], start: float, end: float
) -> dict[str, Any]:
    """Send lag p99 (ms) of the requests scheduled in a burst of chunks (a BURST_BIN_S bin that
    received more chunks than the window's mean bin: the simulator's steps write every stream's token
    at once) or within BURST_AFTER_S after one, and of those scheduled clear of them: where the
    event loop was busy reading, and where it was not."""
    edges = np.arange(start, end + BURST_BIN_S, BURST_BIN_S)
    counts, _ = np.histogram(chunks_at, bins=edges)
    burst = counts > counts.mean()
    busy = burst.copy()
    for shift in range(1, round(BURST_AFTER_S / BURST_BIN_S) + 1):
        busy[shift:] |= burst[:-shift]
    inside, outside = [], []
    for r in rows:
        lag = r["send_lag_s"]
        if lag is None or not start <= r["start_wall_s"] < end:
            continue
        at = int((r["start_wall_s"] - lag - start) // BURST_BIN_S)
        if 0 <= at < len(busy):
            (inside if busy[at] else outside).append(lag * 1000)
    return {
        "burst_share_of_time": float(busy.mean()),
        "send_lag_ms_p99_in_bursts": harness.percentile(inside, 0.99),
        "send_lag_ms_p99_between_bursts": harness.percentile(outside, 0.99),
    }


def gc_pauses(out: Path, start: float, end: float) -> dict[str, Any]:
    """The worker's collections that ended in [start, end): count, total, p99 and max pause (ms)."""
    pauses = [
        ms
        for f in out.glob("gc-*.json")
        for t, ms, _gen in json.loads(f.read_text() or "[]")
        if start <= t < end
    ]
    return {
        "gc_collections": len(pauses),
        "gc_ms_total": sum(pauses),
        "gc_ms_p99": harness.percentile(pauses, 0.99),
        "gc_ms_max": max(pauses, default=None),
    }


def heap_per_stream(out: Path) -> dict[str, Any]:
    """The worker's allocated blocks against its requests in flight, sampled once a second through
    the run: the slope of a least-squares line (blocks per open stream: what the collector's
    clean-up allows the heap to grow by per stream, swarm/live/gc_tuning.py) and the peak."""
    samples = [s for f in out.glob("heap-*.json") for s in json.loads(f.read_text() or "[]")]
    busy = [(streams, blocks) for _t, blocks, streams in samples if streams > 0]
    if len(busy) < 3 or len({s for s, _ in busy}) < 2:
        return {"blocks_per_stream": None, "blocks_peak": None}
    streams, blocks = np.array(busy, dtype=float).T
    return {"blocks_per_stream": float(np.polyfit(streams, blocks, 1)[0]), "blocks_peak": int(blocks.max())}


def chunk_times(out: Path) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Every token-carrying chunk's arrival (wall clock) from the records, and the records."""
    from swarm.core import recordfile

    cols = ["request_id", "start_wall_s", "ttft_s", "itl_s", "e2e_s", "outcome", "send_lag_s"]
    rows = recordfile.read_table(out / "records").select(cols).to_pylist()
    times = []
    for r in rows:
        if r["ttft_s"] is None:
            continue
        first = r["start_wall_s"] + r["ttft_s"]
        times.append(first + np.concatenate([[0.0], np.cumsum(r["itl_s"] or [])]))
    return (np.concatenate(times) if times else np.array([])), rows


def open_streams(records: list[dict[str, Any]], start: float, end: float) -> list[int]:
    """Requests open (sent, not yet ended) at each whole second of [start, end)."""
    begins = np.array([r["start_wall_s"] for r in records])
    ends = begins + np.array([r["e2e_s"] or 0.0 for r in records])
    return [int(np.sum((begins <= t) & (ends > t))) for t in np.arange(start, end, 1.0)]


def poll_running(url: str, stop: float, out: list[tuple[float, float]]) -> None:
    """The simulator's vllm:num_requests_running, once a second until `stop` (a thread)."""
    while time.time() < stop:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("vllm:num_requests_running"):
                    out.append((time.time(), float(line.rsplit(" ", 1)[1])))
        time.sleep(1.0)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=10_000, help="streams open at once (default 10000)")
    ap.add_argument(
        "--steady-s", type=int, default=30, help="seconds measured at full concurrency (default 30)"
    )
    ap.add_argument(
        "--open-loop",
        action="store_true",
        help="Poisson arrivals that keep --streams open, to measure the send lag at that concurrency",
    )
    ap.add_argument(
        "--sims",
        type=int,
        default=1,
        help="simulators behind --host A,B,... (default 1): one on its core does not keep up with 10,000 open-loop streams",
    )
    ap.add_argument(
        "--step-s",
        type=float,
        default=STEP_S,
        help=f"the simulators' decode step: a token per stream every STEP seconds (default {STEP_S:g})",
    )
    ap.add_argument("--out", type=Path, default=REPO / "runs/bench-scale/streams", help="run files")
    ap.add_argument("--results", type=Path, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    if args.streams < 10:
        ap.error("--streams: at least 10")
    if args.sims < 1:
        ap.error("--sims: at least 1")
    if not 0.1 <= args.step_s <= 10:
        ap.error("--step-s: from 0.1 to 10 seconds")
    users = int(args.streams * 1.3) if args.open_loop else args.streams
    why = check_limits(args.streams, users)
    if why:
        print(f"streams_10k: {why}", file=sys.stderr)
        return 2
    log(
        f"{harness.cores()} cores, load average {harness.load_average()[0]:.2f}; open files "
        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}; {args.streams} streams"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.out / "swarm", ignore_errors=True)  # an earlier run's records, GC and heap samples
    answer_s = (TOKENS + 1) * args.step_s  # a stream's life: TOKENS steps and the wait for the first
    ramp_s = max(30, math.ceil(answer_s + 4))  # all users spawned, their first streams ended (filled)
    drain_s = max(40, math.ceil(answer_s * 1.5))  # streams begun in the window end (and are recorded)
    rate = args.streams / answer_s if args.open_loop else None
    profile = PROFILE
    if args.step_s != STEP_S:
        profile = args.out / "slow-decode.toml"
        text = PROFILE.read_text()
        assert f"\nbase_s = {STEP_S}\n" in text, "the profile's step is not STEP_S"
        profile.write_text(text.replace(f"\nbase_s = {STEP_S}\n", f"\nbase_s = {args.step_s}\n", 1))
    prompts = harness.write_prompts(args.out / "prompts.jsonl", n=2000)
    rows = [{**json.loads(line), "max_tokens": TOKENS} for line in prompts.read_text().splitlines()]
    prompts.write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )  # a row's max_tokens wins over --max-tokens
    traces = [args.out / f"sim-trace-{i}.jsonl" for i in range(args.sims)]
    sampler = harness.Sampler(interval_s=1.0)
    running: list[list[tuple[float, float]]] = [[] for _ in traces]
    with sampler, contextlib.ExitStack() as sims:
        urls = []
        for i, trace in enumerate(traces):
            trace.unlink(missing_ok=True)
            port = harness.free_port()
            sim_cmd = [*harness.pin(0), sys.executable, "-m", "swarm", "sim", "--profile", str(profile)]
            sim_cmd += ["--host", "127.0.0.1", "--port", str(port), "--model", harness.SIM_MODEL]
            sim_cmd += ["--trace", str(trace)]
            sim = sims.enter_context(harness.started(f"sim{i}", sim_cmd, args.out / f"sim-{i}.log"))
            urls.append(f"http://127.0.0.1:{port}")
            harness.wait_http(urls[-1] + "/health", sim)
            sampler.watch(f"sim{i}", sim.pid)
        url = ",".join(urls)  # --host A,B: the swarm balances its users over them
        total_s = ramp_s + args.steady_s + drain_s
        if rate is None:
            run = StreamRun(args.out / "swarm", url, prompts, users=users, run_time_s=total_s)
        else:  # one open-loop stage as long as the closed-loop run, without warm-up
            run = StreamRun(
                args.out / "swarm",
                url,
                prompts,
                users=users,
                rates=[round(rate, 1)],
                stage_time_s=total_s,
                warmup_s=0,
            )
        for sim_url, polled in zip(urls, running, strict=True):
            threading.Thread(
                target=poll_running,
                args=(sim_url + "/metrics", time.time() + run.expected_s() + 30, polled),
                daemon=True,
            ).start()
        loop = (
            f"open loop, {rate:.1f} req/s (Poisson) with at most {users} in flight"
            if rate is not None
            else f"closed loop, {args.streams} users"
        )
        log(
            f"{loop} streaming {TOKENS}-token answers: {ramp_s} s to fill, "
            f"{args.steady_s} s measured, {drain_s} s for the measured streams to end"
        )
        summary = run.run(sampler)
    time.sleep(0.5)
    stage = summary["stage_timeline"][0]
    start = stage["start_wall_s"] + ramp_s
    end = start + args.steady_s
    chunks_at, rows = chunk_times(args.out / "swarm")
    records = [r for r in rows if r["e2e_s"] is not None]
    server = {rid: t for trace in traces for rid, t in harness.read_trace(trace).items()}
    errors = []  # requests whose first token came in the window
    for r in records:
        s = server.get(r["request_id"])
        if r["outcome"] != "ok" or r["ttft_s"] is None or not s or s.get("first_token_time") is None:
            continue
        if start <= r["start_wall_s"] + r["ttft_s"] < end:
            errors.append((r["start_wall_s"] + r["ttft_s"] - s["first_token_time"]) * 1000)
    opened = open_streams(records, start, end)
    # requests running on the simulators together: each one's median in the window, summed
    inside = [[n for t, n in polled if start <= t < end] for polled in running]
    server_open = [statistics.median(n) if n else None for n in inside]
    chunks = int(np.sum((chunks_at >= start) & (chunks_at < end)))
    cpu = sampler.cpu_percent("worker-0", start, end)
    sim_cpus = [sampler.cpu_percent(f"sim{i}", start, end) for i in range(args.sims)]
    sim_cpu = None if None in sim_cpus else sum(sim_cpus)  # (a simulator unsampled: not 0%)
    rss = sampler.rss("worker-0")
    # the worker's RSS at its first request: loaded, its users spawning
    first = min(r["start_wall_s"] for r in rows)
    base = ([b for t, b in rss if t < first and b > 0] or [rss[0][1]])[-1]
    peak = max(b for t, b in rss if start <= t <= end)
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    streams = statistics.median(opened)
    lags = [
        r["send_lag_s"] * 1000
        for r in rows
        if r["send_lag_s"] is not None and start <= r["start_wall_s"] < end
    ]
    result = {
        "open_loop_rate": rate,
        "in_flight_cap": users if rate is not None else None,
        "streams_open_max": max(opened),
        "send_lag_ms_p50": harness.percentile(lags, 0.5),
        "send_lag_ms_p99": harness.percentile(lags, 0.99),
        "send_lag_ms_max": max(lags, default=None),
        "send_lag_requests": len(lags),
        "streams_target": args.streams,
        "streams_open_median": streams,
        "streams_open_min": min(opened),
        "server_running_median": None if None in server_open else sum(server_open),
        "worker_rss_mib_idle": base / 2**20,
        "worker_rss_mib_peak": peak / 2**20,
        "rss_kib_per_stream": (peak - base) / 1024 / max(1, streams),
        "worker_cpu_percent": cpu,
        "chunks_per_s": chunks / (end - start),
        "cpu_us_per_chunk": (cpu or 0) / 100 * (end - start) / max(1, chunks) * 1e6,
        "ttft_error_ms_p50": harness.percentile(errors, 0.5),
        "ttft_error_ms_p99": harness.percentile(errors, 0.99),
        "ttft_error_ms_max": max(errors, default=None),
        "ttft_pairs": len(errors),
        "sim_cpu_percent": sim_cpu,
        "outcomes": outcomes,
        **gc_pauses(args.out / "swarm", start, end),
        **heap_per_stream(args.out / "swarm"),
        **lag_in_bursts(chunks_at, rows, start, end),
    }
    log(
        f"{streams:.0f} streams open (min {result['streams_open_min']}; the simulators' running requests, median "
        f"{result['server_running_median']}); worker RSS {result['worker_rss_mib_idle']:.0f} -> "
        f"{result['worker_rss_mib_peak']:.0f} MiB ({result['rss_kib_per_stream']:.1f} KiB per stream); "
        f"worker CPU {cpu:.0f}% for {result['chunks_per_s']:,.0f} chunks/s ({result['cpu_us_per_chunk']:.1f} us per chunk)"
    )
    if errors:
        log(
            f"TTFT error vs the simulator's trace: p50 {result['ttft_error_ms_p50']:.2f} ms, p99 "
            f"{result['ttft_error_ms_p99']:.2f} ms, max {result['ttft_error_ms_max']:.1f} ms ({len(errors)} requests)"
        )
    if lags:
        capped = result["streams_open_max"] >= users
        log(
            f"send lag at {streams:.0f} open streams ({rate:.1f} req/s offered): p50 "
            f"{result['send_lag_ms_p50']:.2f} ms, p99 {result['send_lag_ms_p99']:.2f} ms, max "
            f"{result['send_lag_ms_max']:.1f} ms ({len(lags)} requests); in-flight cap {users} "
            + ("REACHED: the lag is the cap's, not the worker's" if capped else "never reached")
        )
    if lags and result["send_lag_ms_p99_in_bursts"] is not None:
        log(
            f"send lag p99 of requests due in a burst of chunks or {BURST_AFTER_S * 1000:.0f} ms after one "
            f"({result['burst_share_of_time']:.0%} of the time): {result['send_lag_ms_p99_in_bursts']:.1f} ms; clear of them: "
            f"{result['send_lag_ms_p99_between_bursts']:.1f} ms"
        )
    if result["gc_collections"]:
        log(
            f"worker GC in the window: {result['gc_collections']} collections, {result['gc_ms_total']:.0f} ms "
            f"in all, pause p99 {result['gc_ms_p99']:.1f} ms, max {result['gc_ms_max']:.1f} ms"
        )
    if result["blocks_per_stream"] is not None:
        log(
            f"worker heap: {result['blocks_per_stream']:.0f} allocated blocks per request in flight, "
            f"{result['blocks_peak']:,} at the peak"
        )
    sims_cpu = "not sampled" if sim_cpu is None else f"{sim_cpu:.0f}%"
    log(f"simulator{'s' if args.sims > 1 else ''} {sims_cpu} CPU; outcomes {outcomes}")
    if args.results:
        args.results.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
