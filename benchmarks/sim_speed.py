"""How fast does `swarm sim --profile instant` stream? (it must never be what limits a swarm benchmark)

Starts the simulator as its own process pinned to one core (`taskset -c 0` when available),
drives N concurrent streaming chat requests (ignore_eos, fixed max_tokens) from a client process
pinned to another core, and prints token chunks/s across all streams, the server's CPU share
and its RSS at start and end (run with --duration 600 to check that memory stays flat).

    .venv/bin/python benchmarks/sim_speed.py [--streams 64] [--max-tokens 256] [--duration 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pin(core: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > core:
        return ["taskset", "-c", str(core)]
    return []


async def _client(
    url: str, streams: int, max_tokens: int, duration: float, warmup: float
) -> tuple[int, int, float]:
    """Closed loop of `streams` streaming requests; returns (token chunks, requests, seconds) after warm-up."""
    import aiohttp

    def payload(i: int) -> dict:  # a new prompt every time, so the prefix cache keeps filling
        return {
            "model": "sim-model",
            "messages": [{"role": "user", "content": f"Request {i}: benchmark the simulator. " * 8}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        }

    t0 = time.perf_counter()
    start, stop = t0 + warmup, t0 + warmup + duration
    chunks = requests = sent = 0

    async def loop(session: aiohttp.ClientSession) -> None:
        nonlocal chunks, requests, sent
        while time.perf_counter() < stop:
            sent += 1
            async with session.post(url, json=payload(sent)) as r:
                parts = [b async for b in r.content.iter_any()]
            body = b"".join(parts)
            if not body.endswith(b"data: [DONE]\n\n"):
                raise RuntimeError(f"stream did not end with [DONE]: {body[-200:]!r}")
            if time.perf_counter() >= start:
                chunks += body.count(b"data: ") - 2  # minus the role chunk and [DONE]
                requests += 1

    conn = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(*(loop(session) for _ in range(streams)))
    return chunks, requests, time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--client-only", metavar="URL", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.client_only:  # the client half, in its own pinned process
        chunks, requests, secs = asyncio.run(
            _client(args.client_only, args.streams, args.max_tokens, args.duration, args.warmup)
        )
        print(f"{chunks} {requests} {secs}")
        return 0

    import psutil

    port = _free_port()
    server_cmd = [*_pin(0), sys.executable, "-m", "swarm", "sim", "--profile", "instant", "--port", str(port)]
    server = subprocess.Popen(server_cmd, cwd=REPO, stdout=subprocess.DEVNULL, start_new_session=True)
    client = None
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        proc = psutil.Process(server.pid)
        if proc.name() == "taskset" or proc.children():
            proc = proc.children()[0] if proc.children() else proc
        rss_start = proc.memory_info().rss
        cpu_start = sum(proc.cpu_times()[:2])
        wall_start = time.perf_counter()
        client_cmd = [
            *_pin(1),
            sys.executable,
            __file__,
            "--client-only",
            f"http://127.0.0.1:{port}/v1/chat/completions",
            "--streams",
            str(args.streams),
            "--max-tokens",
            str(args.max_tokens),
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
        ]
        client = subprocess.Popen(
            client_cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        rss = [rss_start]
        while client.poll() is None:
            time.sleep(1.0)
            rss.append(proc.memory_info().rss)
        stdout, stderr = client.communicate()
        if client.returncode != 0:
            print(stderr, file=sys.stderr)
            return 1
        chunks, requests, secs = stdout.split()
        cpu = (sum(proc.cpu_times()[:2]) - cpu_start) / (time.perf_counter() - wall_start)
        rss_end = proc.memory_info().rss
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait(timeout=10)
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    rate = int(chunks) / float(secs)
    print(
        f"sim instant: {rate:,.0f} token chunks/s across {args.streams} streams "
        f"({int(requests) / float(secs):,.0f} req/s, max_tokens {args.max_tokens}); server CPU {cpu:.0%} of a core; "
        f"RSS {rss_start / 2**20:.1f} MiB at start, {rss[len(rss) // 2] / 2**20:.1f} MiB halfway, "
        f"{rss_end / 2**20:.1f} MiB at the end (max {max(rss) / 2**20:.1f})"
    )
    if len(rss) > 120:  # a long run: the curve, a sample a minute, and the growth over its second half
        per_min = [f"{r / 2**20:.1f}" for r in rss[::60]]
        half = rss[len(rss) // 2 :]
        print(
            f"RSS each minute (MiB): {' '.join(per_min)}; second half: {min(half) / 2**20:.1f}-"
            f"{max(half) / 2**20:.1f} MiB, end - halfway {(rss_end - half[0]) / 2**20:+.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    from harness import exit_on_termination  # (benchmarks/: this script's own folder)

    exit_on_termination()
    raise SystemExit(main())
