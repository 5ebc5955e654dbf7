"""How many workers one Locust master holds: one real master, 16, 64 and 256 workers.

    .venv/bin/python benchmarks/master_scale.py                 # `make bench-scale`, ~3 min
    .venv/bin/python benchmarks/master_scale.py --workers 16 --measure-s 10 --record-s 12   # quick

1. Record: a real run (the simulated vLLM with its calibrated profile and a few faults, a master
   and 2 workers, `--sweep 32,160`, workloads short_qa:3,chat:1,mixed:1) whose master appends every
   worker report, exactly as it arrived over ZeroMQ, to a file (benchmarks/report_recorder.py).
2. Replay: for each worker count, a fresh real master (the swarm's locustfile, web UI mode, pinned
   to core 0) and that many fake workers in a few light processes (pinned to core 1). Each fake
   worker is one ZeroMQ DEALER socket speaking Locust's protocol (`client_ready`, a heartbeat every
   second, a `stats` message every report interval, 3 s, at a random phase), the `stats` data being
   the recorded reports in turn: Locust's own stats plus the swarm's `WorkerReport`.

Printed per worker count: the master's CPU (% of one core) and CPU per report, the time to merge
one report (`Aggregate.read_wire` + `merge_read`, timed in this process on the recorded reports), the
time from a worker's report to /metrics showing it (a probe worker adds one request of workload
`bench_probe` to a report and polls /metrics until the counter moves), the /metrics scrape time,
and the master's RSS. Goal: 256 workers under 50% of one core.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

REPO = harness.REPO
REPORT_INTERVAL_S = 3.0  # Locust's WORKER_REPORT_INTERVAL
HEARTBEAT_S = 1.0  # Locust's HEARTBEAT_INTERVAL
PROBE = "bench_probe"
GOAL_PERCENT = 50.0


def log(msg: str) -> None:
    print(f"[master-scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- 1. recording -----------------------------------------------------------------------------


def record(out: Path, seconds: int, sweep: str) -> Path:
    """A real distributed run; returns the file of its worker reports (msgpack, one after another)."""
    path = out / "reports.msgpack"
    path.unlink(missing_ok=True)
    port, sim_port = harness.free_port(), harness.free_port()
    stage_s = max(4, seconds // 2)
    sim = [sys.executable, "-m", "swarm", "sim", "--host", "127.0.0.1", "--port", str(sim_port)]
    sim += ["--profile", "rtx5090x4-qwen3.6-27b", "--fault", "http_429=0.02", "--fault", "cut=0.01"]
    common = ["-f", str(REPO / "benchmarks/report_recorder.py"), "--host", f"http://127.0.0.1:{sim_port}"]
    common += ["--workload", "short_qa:3,chat:1,mixed:1", "--run-id", "master-scale"]
    master = [sys.executable, "-m", "locust", *common, "--master", "--headless", "--master-bind-host"]
    master += ["127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "2"]
    master += ["--sweep", sweep, "--stage-time", f"{stage_s}s", "--warmup", "1s", "--only-summary"]
    master += ["--stop-timeout", "5s"]
    worker = [sys.executable, "-m", "locust", *common, "--worker", "--master-port", str(port)]
    env = {"SWARM_BENCH_RECORD": str(path)}
    with contextlib.ExitStack() as stack:
        s = stack.enter_context(harness.started("sim", sim, out / "record-sim.log"))
        harness.wait_http(f"http://127.0.0.1:{sim_port}/health", s)
        m = stack.enter_context(harness.started("master", master, out / "record-master.log", env))
        for i in range(2):
            stack.enter_context(harness.started(f"worker-{i}", worker, out / f"record-worker-{i}.log"))
        try:
            m.popen.wait(timeout=2 * stage_s + 90)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"recording master did not finish; log tail:\n{m.tail()}") from None
    reports = load(path)
    if not reports:
        raise RuntimeError(f"no worker report recorded; master log tail:\n{m.tail()}")
    return path


def load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, "rb") as f:
        return [
            r for r in msgpack.Unpacker(f, raw=False, strict_map_key=False) if r.get("swarm", {}).get("cells")
        ]


def describe(reports: Sequence[dict[str, Any]]) -> str:
    sizes = [len(msgpack.packb(r)) for r in reports]
    cells = [len(r["swarm"]["cells"]) for r in reports]
    bins = [
        sum(len(lat["bins"]) // lat["w"] for c in r["swarm"]["cells"] for lat in c["lat"].values())
        for r in reports
    ]
    names = sorted({(c["workload"], c["stage"]) for r in reports for c in r["swarm"]["cells"]})
    return (
        f"{len(reports)} reports with requests; cells (workload, stage) {names}; per report: "
        f"{statistics.median(cells):.0f} cells, {statistics.median(bins):.0f} sketch bins, "
        f"{statistics.median(sizes) / 1024:.1f} KiB msgpack (max {max(sizes) / 1024:.1f})"
    )


# -- 2. fake workers (a subprocess: plain pyzmq, no gevent) -----------------------------------


def probe_cell() -> dict[str, Any]:
    """One request of workload `bench_probe`: the marker the probe worker adds to a report."""
    from swarm.stats.aggregate import Cell

    c = Cell(PROBE, 0).to_wire()
    c.update(requests=1, outcomes={"ok": 1})
    return c


def fake_workers(argv: Sequence[str]) -> int:
    """`master_scale.py --fake-workers PORT N FIRST REPORTS VERSION`: N workers over ZeroMQ."""
    import zmq

    port, n, first, path, version = int(argv[0]), int(argv[1]), int(argv[2]), Path(argv[3]), argv[4]
    reports = load(path)
    ctx = zmq.Context()
    rng = random.Random(first)
    socks, ids = [], []
    poller = zmq.Poller()
    for i in range(first, first + n):
        node = f"fake-{i:04d}"
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, node.encode())
        s.setsockopt(zmq.LINGER, 0)
        s.connect(f"tcp://127.0.0.1:{port}")
        s.send(msgpack.packb(("client_ready", version, node)))
        poller.register(s, zmq.POLLIN)
        socks.append(s)
        ids.append(node)
    now = time.monotonic()
    next_report = [now + rng.uniform(0, REPORT_INTERVAL_S) for _ in socks]
    next_beat = [now + rng.uniform(0, HEARTBEAT_S) for _ in socks]
    turn = [rng.randrange(len(reports)) for _ in socks]
    beat = {"state": "running", "current_cpu_usage": 40.0, "current_memory_usage": 150_000_000}
    sent = 0
    while True:
        now = time.monotonic()
        for k, s in enumerate(socks):
            if now >= next_beat[k]:
                s.send(msgpack.packb(("heartbeat", beat, ids[k])))
                next_beat[k] += HEARTBEAT_S
            if now >= next_report[k]:
                data = reports[turn[k] % len(reports)]
                turn[k] += 1
                s.send(msgpack.packb(("stats", data, ids[k])))
                next_report[k] += REPORT_INTERVAL_S
                sent += 1
        wake = min(min(next_beat), min(next_report))
        for s, _ in poller.poll(timeout=max(0, int((wake - time.monotonic()) * 1000))):
            while True:
                try:
                    msg = msgpack.unpackb(s.recv(zmq.NOBLOCK), raw=False, strict_map_key=False)
                except zmq.Again:
                    break
                if msg[0] == "quit":
                    return 0


class ProbeWorker:
    """One of the N workers, in this process: replays reports like the others, and on demand
    sends one with a `bench_probe` request, then polls /metrics until the master shows it."""

    def __init__(self, port: int, version: str, reports: list[dict[str, Any]], metrics_url: str) -> None:
        import zmq

        self.zmq = zmq
        self.node = "fake-probe"
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, self.node.encode())
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.sock.send(msgpack.packb(("client_ready", version, self.node)))
        self.reports = reports
        self.turn = 0
        self.url = metrics_url
        self.seen = 0.0
        self.latencies_s: list[float] = []
        self.scrapes_s: list[float] = []

    def _drain(self) -> None:
        with contextlib.suppress(self.zmq.Again):
            while True:
                self.sock.recv(self.zmq.NOBLOCK)

    def heartbeat(self) -> None:
        beat = {"state": "running", "current_cpu_usage": 40.0, "current_memory_usage": 150_000_000}
        self.sock.send(msgpack.packb(("heartbeat", beat, self.node)))
        self._drain()

    def scrape(self) -> float:
        t0 = time.perf_counter()
        with urllib.request.urlopen(self.url, timeout=30) as r:
            text = r.read().decode()
        self.scrapes_s.append(time.perf_counter() - t0)
        for line in text.splitlines():
            if (
                line.startswith("swarm_requests_total{")
                and f'workload="{PROBE}"' in line
                and 'outcome="ok"' in line
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def report(self, probe: bool) -> None:
        data = dict(self.reports[self.turn % len(self.reports)])
        self.turn += 1
        if probe:
            swarm = dict(data["swarm"])
            swarm["cells"] = [*swarm["cells"], probe_cell()]
            data["swarm"] = swarm
        t0 = time.perf_counter()
        self.sock.send(msgpack.packb(("stats", data, self.node)))
        if not probe:
            return
        deadline = t0 + 30
        while time.perf_counter() < deadline:
            value = self.scrape()
            if value > self.seen:
                self.seen = value
                self.latencies_s.append(time.perf_counter() - t0)
                return
            time.sleep(0.005)
        raise RuntimeError("the probe's request never showed on /metrics")


# -- 3. one level ------------------------------------------------------------------------------


def merge_times_ms(reports: Sequence[dict[str, Any]], rounds: int = 3) -> list[float]:
    """Time to merge one report into the run's aggregate, as the master does (read_wire + merge_read)."""
    from swarm.stats.aggregate import Aggregate

    total = Aggregate()
    out = []
    for _ in range(rounds):
        for r in reports:
            t0 = time.perf_counter()
            total.merge_read(Aggregate.read_wire(r["swarm"]))
            out.append(1000 * (time.perf_counter() - t0))
    return out


def worst_case_report() -> dict[str, Any]:
    """A bound, not a recording: 3 workloads x 2 stages (a report across a stage change), every
    latency's sketch filled from 1 ms to 30 s (every DDSketch bin in that range populated)."""
    import numpy as np

    from swarm.core.records import LATENCIES
    from swarm.stats.aggregate import Aggregate

    rng = np.random.default_rng(16)
    agg = Aggregate()
    for workload in ("short_qa", "chat", "mixed"):
        for stage in (0, 1):
            c = agg.cell(workload, stage)
            c.requests = c.outcomes["ok"] = 1000
            for name in LATENCIES:
                c.latencies[name].extend((10 ** rng.uniform(-3, 1.5, 20_000)).tolist())
    return {"swarm": {**agg.to_wire(), "stopped": False, "model_name": "bench", "cpu": [[0, 0.4, 0.5]]}}


def wait_workers(url: str, n: int, master: harness.Proc, timeout_s: float = 120) -> None:
    """Until the master's /metrics says `n` workers (swarm_workers)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("swarm_workers") and float(line.rsplit(" ", 1)[1]) >= n:
                    return
        if master.popen.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"{n} workers did not connect in {timeout_s:g} s; master log:\n{master.tail()}")


def level(
    out: Path, n: int, recording: Path, reports: list[dict[str, Any]], args: argparse.Namespace
) -> dict:
    version = importlib.metadata.version("locust")
    port, web = harness.free_port(), harness.free_port()
    master_cmd = [*harness.pin(0), sys.executable, "-m", "locust", "-f", str(REPO / "swarm/locustfile.py")]
    master_cmd += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
    master_cmd += ["--web-host", "127.0.0.1", "--web-port", str(web), "--run-id", "master-scale"]
    procs = max(1, min(8, (n - 1 + 63) // 64))
    per = [(n - 1) // procs + (1 if i < (n - 1) % procs else 0) for i in range(procs)]
    sampler = harness.Sampler(interval_s=0.5)
    with contextlib.ExitStack() as stack:
        stack.enter_context(sampler)
        master = stack.enter_context(harness.started("master", master_cmd, out / f"master-{n}.log"))
        base = f"http://127.0.0.1:{web}"
        harness.wait_http(base + "/metrics", master)
        sampler.watch("master", master.pid)
        first = 0
        for i, k in enumerate(per):
            cmd = [*harness.pin(1), sys.executable, __file__, "--fake-workers", str(port), str(k), str(first)]
            cmd += [str(recording), version]
            p = stack.enter_context(harness.started(f"fakes-{i}", cmd, out / f"fakes-{n}-{i}.log"))
            sampler.watch(p.name, p.pid)
            first += k
        probe = ProbeWorker(port, version, reports, base + "/metrics")
        wait_workers(base + "/metrics", n, master)
        log(f"{n} workers connected; warming up {args.warmup_s:g} s")
        t_end = time.perf_counter() + args.warmup_s
        while time.perf_counter() < t_end:
            probe.heartbeat()
            time.sleep(HEARTBEAT_S)
        w0 = time.time()
        rss_peak = 0
        t_next_report = time.perf_counter()
        n_probe = 0
        end = time.perf_counter() + args.measure_s
        while time.perf_counter() < end:
            probe.heartbeat()
            if time.perf_counter() >= t_next_report:
                n_probe += 1
                probe.report(probe=n_probe % 2 == 1)  # every other report carries the probe
                t_next_report += REPORT_INTERVAL_S
            time.sleep(HEARTBEAT_S / 2)
        w1 = time.time()
        cpu = sampler.cpu_percent("master", w0, w1)
        fakes_cpu = sum(sampler.cpu_percent(f"fakes-{i}", w0, w1) or 0.0 for i in range(procs))
        rss_peak = max((rss for _, rss in sampler.rss("master")), default=0)
        for p in [master]:
            if p.popen.poll() is not None:
                raise RuntimeError(f"master exited during the run:\n{p.tail()}")
    reports_per_s = n / REPORT_INTERVAL_S
    merge = merge_times_ms(reports)
    result = {
        "workers": n,
        "master_cpu_percent": cpu,
        "reports_per_s": reports_per_s,
        "master_cpu_ms_per_report": (cpu or 0) / 100 * 1000 / reports_per_s,
        "merge_ms_p50": statistics.median(merge),
        "merge_ms_max": max(merge),
        "report_to_metrics_ms": [1000 * x for x in probe.latencies_s],
        "scrape_ms_median": 1000 * statistics.median(probe.scrapes_s) if probe.scrapes_s else None,
        "master_rss_mib": rss_peak / 2**20,
        "fake_workers_cpu_percent": fakes_cpu,
    }
    lat = result["report_to_metrics_ms"]
    log(
        f"{n:>4} workers: master {cpu:5.1f}% of a core, {result['master_cpu_ms_per_report']:.2f} ms CPU per report "
        f"({reports_per_s:.1f} reports/s); merge p50 {result['merge_ms_p50']:.2f} ms; report->/metrics "
        f"median {statistics.median(lat):.0f} ms, max {max(lat):.0f} ms ({len(lat)} probes); scrape "
        f"{result['scrape_ms_median']:.1f} ms; RSS {result['master_rss_mib']:.0f} MiB; "
        f"(fake workers {fakes_cpu:.0f}% CPU)"
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--fake-workers"]:
        return fake_workers(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="16,64,256", help="worker counts (default 16,64,256)")
    ap.add_argument("--record-s", type=int, default=24, help="seconds of the recorded real run (default 24)")
    ap.add_argument(
        "--sweep",
        default="32,160",
        help="the recorded run's two stages, users over 2 workers (default 32,160)",
    )
    ap.add_argument("--warmup-s", type=float, default=6.0, help="seconds before measuring (default 6)")
    ap.add_argument("--measure-s", type=float, default=30.0, help="seconds measured per level (default 30)")
    ap.add_argument("--out", type=Path, default=REPO / "runs/bench-scale/master-scale", help="run files")
    ap.add_argument("--results", type=Path, help="write the figures as JSON here")
    ap.add_argument(
        "--no-worst-case", action="store_true", help="skip the last run, every report the worst case"
    )
    ap.add_argument(
        "--worst-case-workers", type=int, default=64, help="workers in the worst-case run (default 64)"
    )
    args = ap.parse_args(argv)
    try:
        counts = [int(x) for x in args.workers.split(",")]
    except ValueError:
        ap.error(f"--workers: comma-separated integers, got {args.workers!r}")
    if min(counts) < 2:
        ap.error("--workers: at least 2 (one is the probe)")
    args.out.mkdir(parents=True, exist_ok=True)
    log(f"{harness.cores()} cores, load average {harness.load_average()[0]:.2f}; recording {args.record_s} s")
    recording = record(args.out, args.record_s, args.sweep)
    reports = load(recording)
    log(describe(reports))
    results = {
        "reports": describe(reports),
        "levels": [level(args.out, n, recording, reports, args) for n in counts],
    }
    last = results["levels"][-1]
    verdict = "meets" if (last["master_cpu_percent"] or 100) < GOAL_PERCENT else "MISSES"
    log(
        f"{last['workers']} workers: {last['master_cpu_percent']:.1f}% of one core: {verdict} the goal (< {GOAL_PERCENT:g}%)"
    )
    if not args.no_worst_case:
        # The bound: the same master and worker count, every report the worst case (a real
        # report's Locust part, the swarm part replaced).
        worst = [{**reports[0], "swarm": {**reports[0]["swarm"], **worst_case_report()["swarm"]}}]
        heavy = args.out / "worst-case.msgpack"
        heavy.write_bytes(msgpack.packb(worst[0]))
        log(f"worst case: {describe(worst)}")
        results["worst_case"] = level(args.out, args.worst_case_workers, heavy, worst, args)
        w = results["worst_case"]
        bound = int(GOAL_PERCENT / 100 * REPORT_INTERVAL_S * 1000 / w["master_cpu_ms_per_report"])
        log(
            f"worst case: {w['master_cpu_ms_per_report']:.1f} ms CPU per report: {GOAL_PERCENT:g}% of a core holds ~{bound} such workers"
        )
        results["worst_case_workers_at_goal"] = bound
    if args.results:
        args.results.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
