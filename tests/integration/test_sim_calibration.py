"""The calibrated profile against seed 000, over HTTP in real time, with a compact closed-loop client.

Short QA (max_tokens 50, thinking off) at 10/30/64/128/200/256 concurrent loops must land within
±20% of the seed's QPS, 256 must not beat 200 by more than a few percent (the plateau), and KV
usage must reach 0.85+ at the top. To keep the test short, the levels run back to back, adding
loops as concurrency rises, each measured in steady state for a few seconds after a short
warm-up. (The seed's script ran 30 s per level from a cold start and also counted each loop's
last request, which ends after the 30 s: that reads 0-7% above steady state here, see
`python -m swarm.sim.calibrate`.) General chat (max_tokens 150, as the seed's script sends) is
run exactly as the seed ran it, 200 loops for 30 s, and must give about 32 QPS.
"""

from __future__ import annotations

import asyncio
import random
import re
import time

import pytest

from swarm.sim.calibrate import CHAT_PROMPTS, SEED_CHAT, SEED_SHORT_QA, SHORT_QA_PROMPTS
from tests.helpers.support import sim_server

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

PROFILE = "rtx5090x4-qwen3.6-27b"
# concurrency -> (warm-up s, measured s)
SHORT_QA_LEVELS = {10: (4, 6), 30: (4, 6), 64: (4, 6), 128: (5, 7), 200: (7, 12), 256: (7, 12)}
STAGGER_S = 3.0  # new loops start spread over this long (about one request's time at the top)
SEED_DURATION_S = 30.0
_KV = re.compile(r"^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$", re.M)
_RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", re.M)


class ClosedLoop:
    """N loops, each sending its next streaming request as soon as the previous one ends."""

    def __init__(
        self, session, url: str, prompts: tuple[str, ...], max_tokens: int, deadline: float = float("inf")
    ) -> None:
        self.session, self.url, self.prompts, self.max_tokens = session, url, prompts, max_tokens
        self.deadline = deadline  # no new request after this (time.monotonic())
        self.done: list[float] = []  # end times of successful requests
        self.errors = 0
        self.tasks: list[asyncio.Task] = []
        self.rng = random.Random(0)

    async def _loop(self, delay: float) -> None:
        await asyncio.sleep(delay)  # staggered starts: fewer lock-step waves in steady state
        while time.monotonic() < self.deadline:
            payload = {
                "model": "sim-model",
                "messages": [{"role": "user", "content": self.rng.choice(self.prompts)}],
                "max_tokens": self.max_tokens,
                "temperature": 0.7,
                "stream": True,
                "chat_template_kwargs": {"enable_thinking": False},
            }
            try:
                async with self.session.post(self.url + "/v1/chat/completions", json=payload) as r:
                    body = await r.read()
                if r.status == 200 and body.endswith(b"data: [DONE]\n\n"):
                    self.done.append(time.monotonic())
                else:
                    self.errors += 1
            except OSError:
                self.errors += 1

    def grow_to(self, n: int, stagger_s: float = STAGGER_S) -> None:
        while len(self.tasks) < n:
            self.tasks.append(asyncio.create_task(self._loop(self.rng.uniform(0, stagger_s))))

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def qps(self, t0: float, t1: float) -> float:
        return sum(t0 <= t < t1 for t in self.done) / (t1 - t0)


async def _watch(session, url: str, stop: asyncio.Event, kv: list[float], running: list[float]) -> None:
    while not stop.is_set():
        async with session.get(url + "/metrics") as r:
            text = await r.text()
        kv.append(float(_KV.search(text).group(1)))
        running.append(float(_RUNNING.search(text).group(1)))
        await asyncio.sleep(0.25)


async def _run(url: str) -> dict:
    import aiohttp

    out: dict = {"short_qa": {}, "kv_top": [], "running_top": []}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=120)) as session:
        loop = ClosedLoop(session, url, SHORT_QA_PROMPTS, 50)
        for conc, (warm, measure) in SHORT_QA_LEVELS.items():
            loop.grow_to(conc)
            await asyncio.sleep(warm)
            t0 = time.monotonic()
            stop = asyncio.Event()
            watcher = None
            if conc == max(SHORT_QA_LEVELS):
                watcher = asyncio.create_task(_watch(session, url, stop, out["kv_top"], out["running_top"]))
            await asyncio.sleep(measure)
            stop.set()
            if watcher:
                await watcher
            out["short_qa"][conc] = loop.qps(t0, time.monotonic())
        await loop.stop()
        out["short_qa_errors"] = loop.errors

        # general chat, counted as the seed's script counts: 30 s, then every request sent by then
        chat = ClosedLoop(session, url, CHAT_PROMPTS, 150, deadline=time.monotonic() + SEED_DURATION_S)
        chat.grow_to(200, stagger_s=0.0)  # the seed's loops all started at once
        await asyncio.gather(*chat.tasks)
        out["chat_200"] = len(chat.done) / SEED_DURATION_S
        out["chat_errors"] = chat.errors
    return out


def test_calibrated_profile_reproduces_seed_000(tmp_path):
    with sim_server(tmp_path, "--profile", PROFILE, trace=False) as sim:
        res = asyncio.run(_run(sim.url))
    qa = res["short_qa"]
    report = ", ".join(f"{c}: {q:.1f} (seed {SEED_SHORT_QA[c]})" for c, q in qa.items())
    print(
        f"\nshort QA QPS: {report}; max KV at 256: {max(res['kv_top']):.2f}, "
        f"max running: {max(res['running_top']):.0f}; chat@200: {res['chat_200']:.1f} (seed 32.2)"
    )
    assert res["short_qa_errors"] == 0 and res["chat_errors"] == 0
    for conc, qps in qa.items():
        assert qps == pytest.approx(SEED_SHORT_QA[conc], rel=0.2), report
    assert 0.85 <= qa[256] / qa[200] <= 1.05, report  # the plateau: 256 is no faster than 200
    assert max(res["kv_top"]) >= 0.85
    assert res["chat_200"] == pytest.approx(SEED_CHAT[200], rel=0.2)
