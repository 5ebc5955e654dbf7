"""The calibrated profile against seed 000's general-chat figure, over HTTP in real time, with a
compact closed-loop client run exactly as the seed's script ran: 200 loops started at once for
30 s (max_tokens 150, thinking off), every request sent by then counted once it ends, divided by
30 s; it must give about 32 QPS (±20%).

The short-QA half of the calibration (10/30/64/128/200/256 users within ±20% of the seed's QPS,
the plateau, KV 0.85+ at the top) is held by the calibrated sweep, which measures the same six
levels through `swarm run` (tests/integration/test_sweep.py
`test_calibrated_sweep_reproduces_the_seed_plateau`; docs/testing.md maps the move).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from swarm.sim.calibrate import CHAT_PROMPTS, SEED_CHAT
from tests.helpers.support import sim_server

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

PROFILE = "rtx5090x4-qwen3.6-27b"
SEED_DURATION_S = 30.0


class ClosedLoop:
    """N loops, each sending its next streaming request as soon as the previous one ends, until
    the deadline (time.monotonic()); a request sent before it counts once it ends."""

    def __init__(self, session, url: str, prompts: tuple[str, ...], max_tokens: int, deadline: float) -> None:
        self.session, self.url, self.prompts, self.max_tokens = session, url, prompts, max_tokens
        self.deadline = deadline
        self.done = 0  # successful requests
        self.errors = 0
        self.tasks: list[asyncio.Task] = []
        self.rng = random.Random(0)

    async def _loop(self) -> None:
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
                    self.done += 1
                else:
                    self.errors += 1
            except OSError:
                self.errors += 1

    def start(self, n: int) -> None:
        self.tasks = [asyncio.create_task(self._loop()) for _ in range(n)]  # the seed's loops all at once


async def _chat_200(url: str) -> tuple[float, int]:
    """(QPS counted as the seed's script counts it, errors)."""
    import aiohttp

    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=120)) as session:
        chat = ClosedLoop(session, url, CHAT_PROMPTS, 150, deadline=time.monotonic() + SEED_DURATION_S)
        chat.start(200)
        await asyncio.gather(*chat.tasks)
    return chat.done / SEED_DURATION_S, chat.errors


def test_calibrated_profile_reproduces_seed_000(tmp_path):
    with sim_server(tmp_path, "--profile", PROFILE, trace=False) as sim:
        qps, errors = asyncio.run(_chat_200(sim.url))
    print(f"\nchat@200: {qps:.1f} (seed {SEED_CHAT[200]})")
    assert errors == 0
    assert qps == pytest.approx(SEED_CHAT[200], rel=0.2)
