"""The simulator's injected front-end and network causes, over HTTP with a real streaming client:
what the client sees is late, the engine's own clocks (trace first_token_time, /metrics TTFT) are
not. The bounds asserted are the lanes' and the delay's arithmetic (lower bounds a slow machine
cannot break), or ratios between runs on the same machine. Without sockets:
tests/unit/sim/test_delivery.py; the diagnosis held to them: test_diagnosis_matrix.py."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiohttp
import pytest

from tests.helpers.sim_http import metric, read_trace, scrape
from tests.helpers.support import sim_server

pytestmark = [pytest.mark.serial, pytest.mark.integration]

PROFILE = "rtx5090x4-qwen3.6-27b"  # one token per ~20 ms step per request: one event per write


@dataclass
class Seen:
    rid: str
    sent: float  # time.time() just before the request went out
    first: float  # the first token's bytes read
    last_token: float
    end: float
    events: int  # SSE events read, [DONE] included


async def _one(session: aiohttp.ClientSession, url: str, max_tokens: int) -> Seen:
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    sent = time.time()
    first = last_token = 0.0
    events = 0
    async with session.post(url + "/v1/chat/completions", json=body) as r:
        assert r.status == 200
        async for line in r.content:
            if not line.startswith(b"data: "):
                continue
            events += 1
            payload = line[6:].strip()
            if payload == b"[DONE]":
                break
            choices = json.loads(payload)["choices"]
            if choices and choices[0]["delta"].get("content"):
                last_token = time.time()
                first = first or last_token
        return Seen(r.headers["x-request-id"], sent, first, last_token, time.time(), events)


def stream(url: str, n: int, max_tokens: int) -> list[Seen]:
    """`n` concurrent streamed chats, each on its own connection."""

    async def go() -> list[Seen]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            return list(await asyncio.gather(*(_one(s, url, max_tokens) for _ in range(n))))

    return asyncio.run(go())


def engine_ttft_mean(url: str) -> float:
    samples = scrape(url)
    total = metric(samples, "vllm:time_to_first_token_seconds_sum")
    return total / metric(samples, "vllm:time_to_first_token_seconds_count")


def _front_end_run(tmp_path, lanes: int, cost_s: float, users: int, tokens: int):
    args = ["--profile", PROFILE, f"--frontend-cost={cost_s * 1e6:g}us", f"--api-server-count={lanes}"]
    with sim_server(tmp_path, *args) as sim:
        seen = stream(sim.url, users, tokens)
        trace = read_trace(sim.trace, [s.rid for s in seen])
        return seen, trace, engine_ttft_mean(sim.url)


def test_one_front_end_lane_makes_clients_wait_while_the_engine_does_not(tmp_path):
    cost, users, tokens = 0.02, 8, 10
    seen, trace, engine_ttft = _front_end_run(tmp_path, 1, cost, users, tokens)
    events = sum(s.events for s in seen)
    span = max(s.end for s in seen) - min(s.sent for s in seen)
    # one lane, one event at a time: the last byte cannot leave before every event has passed it
    assert span >= events * cost, (span, events)
    waits = [trace[s.rid]["first_write_time"] - trace[s.rid]["first_token_time"] for s in seen]
    # 8 first writes (role + first token: 2 events) queue at once: the last waits for >= 7 x 40 ms,
    # less the few steps between the first tokens
    assert max(waits) >= 0.2, waits
    for s in seen:
        t = trace[s.rid]
        assert s.first >= t["first_write_time"] - 0.001  # the client read it after it was written
    client_ttft = sum(s.first - s.sent for s in seen) / users
    assert engine_ttft < client_ttft / 3, (engine_ttft, client_ttft)  # the engine's TTFT is the engine's

    seen8, trace8, _ = _front_end_run(tmp_path, users, cost, users, tokens)  # a lane per request
    waits8 = [trace8[s.rid]["first_write_time"] - trace8[s.rid]["first_token_time"] for s in seen8]
    assert max(waits8) < max(waits) / 2, (waits8, waits)


def test_network_delay_is_a_constant_late_arrival_with_the_token_spacing_kept(tmp_path):
    delay = 0.2
    with sim_server(tmp_path, "--profile", PROFILE, f"--network-delay={delay * 1e3:g}ms") as sim:
        seen = [stream(sim.url, 1, 20)[0] for _ in range(3)]
        trace = read_trace(sim.trace, [s.rid for s in seen])
        engine_ttft = engine_ttft_mean(sim.url)
    for s in seen:
        t = trace[s.rid]
        assert t["first_write_time"] - t["first_token_time"] >= delay - 0.002
        # the client's TTFT is the engine's plus the delay (the request itself is not delayed)
        assert s.first - s.sent >= (t["first_token_time"] - t["arrival_time"]) + delay - 0.002
        # every write is late by the same delay: the decode span is the engine's, not 20 delays long
        engine_span = t["last_token_time"] - t["first_token_time"]
        assert abs((s.last_token - s.first) - engine_span) < 0.15, (s, t)
    client_ttft = sum(s.first - s.sent for s in seen) / len(seen)
    assert client_ttft - engine_ttft >= delay - 0.002
