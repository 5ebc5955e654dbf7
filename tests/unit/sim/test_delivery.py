"""The simulator's injected bottlenecks without sockets: the front-end lanes' clock, delayed
delivery (order, lateness, errors), the token-cost scale, and their flags' checks. Over HTTP with
a real client: tests/integration/test_sim_bottlenecks.py."""

from __future__ import annotations

import argparse
import asyncio
import time

import pytest

from swarm.core.errors import UsageError
from swarm.sim.cli import build_config, configure
from swarm.sim.delivery import DelayedDelivery, DirectDelivery, FrontEnd, delivery
from swarm.sim.engine import Engine, StepPlan
from swarm.sim.profile import StepCost, load_profile
from swarm.sim.trace import TraceRecord


def sim_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configure(p)
    return p.parse_args(list(argv))


# ---- front-end lanes ----------------------------------------------------------------------------
def test_a_lane_serves_events_one_after_another_and_requests_take_lanes_in_turn():
    fe = FrontEnd(2, 0.002)
    assert [fe.lane() for _ in range(5)] == [0, 1, 0, 1, 0]
    assert fe.reserve(0, 3, now=10.0) == pytest.approx(10.006)  # an idle lane: now + 3 events
    assert fe.reserve(0, 1, now=10.001) == pytest.approx(10.008)  # queued behind the first write
    assert fe.reserve(1, 1, now=10.001) == pytest.approx(10.003)  # the other lane is free
    assert fe.reserve(0, 2, now=20.0) == pytest.approx(20.004)  # idle again: no debt carried


# ---- delivery -----------------------------------------------------------------------------------
class Socket:
    """What a StreamResponse does with writes, as far as delivery is concerned: takes the bytes."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.got: list[tuple[float, bytes]] = []
        self.fail_after = fail_after

    async def write(self, data: bytes) -> None:
        if self.fail_after is not None and len(self.got) >= self.fail_after:
            raise ConnectionResetError("client gone")
        self.got.append((time.monotonic(), data))


def test_no_cost_and_no_delay_writes_directly():
    rec = TraceRecord("r", 0.0)
    assert isinstance(delivery(Socket(), rec, None, 0.0), DirectDelivery)  # type: ignore[arg-type]


def test_delayed_writes_keep_their_order_arrive_late_and_never_hold_up_the_producer():
    delay = 0.15

    async def go() -> tuple[Socket, TraceRecord, list[float], list[float]]:
        sock, rec = Socket(), TraceRecord("r", 0.0)
        sink = delivery(sock, rec, None, delay)  # type: ignore[arg-type]
        assert isinstance(sink, DelayedDelivery)
        produced, took = [], []
        for i in range(3):
            t = time.monotonic()
            await sink.write(b"%d" % i, 1)
            produced.append(t)
            took.append(time.monotonic() - t)
            await asyncio.sleep(0.03)
        await sink.flush()
        sink.close()
        return sock, rec, produced, took

    sock, rec, produced, took = asyncio.run(go())
    assert [d for _, d in sock.got] == [b"0", b"1", b"2"]
    for (written, _), t in zip(sock.got, produced, strict=True):
        assert written - t >= delay - 0.002  # asyncio's timer may fire a hair early
    assert max(took) < delay / 2  # queued, not waited for
    assert rec.first_write_time is not None


def test_front_end_lane_delays_writes_by_the_events_queued_before_them():
    async def go() -> tuple[Socket, Socket, float]:
        fe = FrontEnd(1, 0.01)
        a, b = Socket(), Socket()
        sa = delivery(a, TraceRecord("a", 0.0), fe, 0.0)  # type: ignore[arg-type]
        sb = delivery(b, TraceRecord("b", 0.0), fe, 0.0)  # type: ignore[arg-type]
        t0 = time.monotonic()
        await sa.write(b"a", 10)  # 100 ms of the one lane
        await sb.write(b"b", 1)  # behind it: due at +110 ms
        await asyncio.gather(sa.flush(), sb.flush())
        sa.close()
        sb.close()
        return a, b, t0

    a, b, t0 = asyncio.run(go())
    assert a.got[0][0] - t0 >= 0.1 - 0.002
    assert b.got[0][0] - t0 >= 0.11 - 0.002
    assert b.got[0][0] >= a.got[0][0]


def test_a_write_that_fails_is_raised_to_the_producer_and_the_rest_dropped():
    async def go() -> None:
        sock = Socket(fail_after=1)
        sink = delivery(sock, TraceRecord("r", 0.0), None, 0.01)  # type: ignore[arg-type]
        called = []
        await sink.write(b"first", 1)
        await sink.write(b"second", 1, before=lambda: called.append(1))
        await sink.write(b"third", 1)
        with pytest.raises(ConnectionResetError):
            await sink.flush()
        with pytest.raises(ConnectionResetError):
            await sink.write(b"fourth", 1)
        assert [d for _, d in sock.got] == [b"first"]
        assert called == [1]  # the last write's callback ran just before its (failed) write
        sink.close()

    asyncio.run(go())


# ---- compute ------------------------------------------------------------------------------------
def test_token_cost_scale_makes_throughput_flat_in_the_batch():
    base = load_profile("rtx5090x4-qwen3.6-27b")
    slow = base.step.token_costs_scaled(40)
    assert slow.base_s == base.step.base_s and slow.decode_token_s == 40 * base.step.decode_token_s
    assert StepCost().token_costs_scaled(3).instant

    def tok_s(step: StepCost, batch: int) -> float:
        engine = Engine(base.with_overrides(step=step))
        return batch / engine.step_seconds(StepPlan([], 0, batch, 0))

    assert tok_s(base.step, 96) / tok_s(base.step, 48) > 1.25  # the calibrated GPU: still growing
    assert tok_s(slow, 96) / tok_s(slow, 48) < 1.02  # 40x the per-token cost: flat


# ---- flags --------------------------------------------------------------------------------------
def test_flags_reach_the_config():
    cfg = build_config(
        sim_args(
            "--profile",
            "rtx5090x4-qwen3.6-27b",
            "--token-cost-scale",
            "4",
            "--frontend-cost",
            "250us",
            "--api-server-count",
            "3",
            "--network-delay",
            "20ms",
        )
    )
    rtx = load_profile("rtx5090x4-qwen3.6-27b").step
    assert cfg.profile.step == rtx.token_costs_scaled(4)
    assert (cfg.frontend_s_per_chunk, cfg.api_server_count, cfg.network_delay_s) == (0.00025, 3, 0.02)
    plain = build_config(sim_args())
    assert (plain.frontend_s_per_chunk, plain.api_server_count, plain.network_delay_s) == (0.0, 1, 0.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token-cost-scale", "0"], "--token-cost-scale 0.0: must be a positive number"),
        (["--token-cost-scale", "nan"], "--token-cost-scale nan"),
        (["--frontend-cost", "-1"], "--frontend-cost: bad time '-1'"),
        (["--network-delay", "inf"], "--network-delay: bad time 'inf'"),
        (["--api-server-count", "0"], "--api-server-count 0: must be a positive integer"),
    ],
)
def test_bad_flag_values_are_one_line_errors(argv, message):
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        build_config(sim_args(*argv))


def test_the_delays_take_the_one_duration_syntax():
    """A bare number is seconds, as everywhere (250us, 2ms, 0.1s, 1 all read as durations)."""
    cfg = build_config(sim_args("--frontend-cost", "0.002", "--network-delay", "100ms"))
    assert (cfg.frontend_s_per_chunk, cfg.network_delay_s) == (0.002, 0.1)
