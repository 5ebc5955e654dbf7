"""The search's maths (swarm/stats/search.py) on made-up servers: curves with a known answer."""

from __future__ import annotations

import math
import random

import pytest

from swarm.core.errors import UsageError
from swarm.stats import slo
from swarm.stats.search import (
    KNEE_SHARE,
    MIN_OK,
    SETTLE_MAX_S,
    SETTLE_MIN_N,
    SETTLE_WINDOW_S,
    Bracket,
    Completions,
    Measure,
    OverloadGuard,
    Probe,
    SearchSpec,
    Settling,
    TailShare,
    goodput_measure,
    headline,
    judge_stage,
    measure,
    quantile_ci,
)
from swarm.stats.sketch import LatencyStats


def spec(mode: str = "concurrency", slo_text: str | None = "ttft_p99<=800ms", **kw) -> SearchSpec:
    return SearchSpec.parse(
        mode,
        slo_text if mode != "knee" else None,
        kw.get("goodput_min"),
        kw.get("precision"),
        kw.get("budget"),
        kw.get("start", 16),
        kw.get("goodput"),
    )


def ttft_p99(load: float, boundary: float) -> float:
    """A server whose TTFT p99 grows smoothly, then steeply past a queue: 0.8 s exactly at `boundary`."""
    return 0.2 + 0.6 * (load / boundary) ** 3


def run_search(b: Bracket, value, noise: float = 0.0, rng: random.Random | None = None) -> list[float]:
    loads = []
    while (load := b.next_load()) is not None:
        loads.append(load)
        v = value(load) * (1 + (rng.gauss(0, noise) if rng else 0.0))
        ok = v <= 0.8
        b.record(Probe(len(loads) - 1, load, ok, None, v, v / 0.8, 10.0, "decided"))
        assert len(loads) < 40, loads
    return loads


@pytest.mark.parametrize("boundary", [37.0, 152.5, 600.0])
def test_converges_on_the_boundary_to_the_precision(boundary):
    b = Bracket(spec())
    loads = run_search(b, lambda x: ttft_p99(x, boundary))
    ans = b.answer()
    lo, hi = ans["bracket"]
    assert b.status == "converged" and ans["converged"]
    assert lo <= boundary < hi  # the true boundary lies inside the final bracket
    assert hi - lo <= max(1.0, 0.05 * lo)  # to the stated precision
    assert ans["answer"] == lo
    bisection = math.ceil(
        math.log2(boundary / (0.05 * boundary))
    )  # probes bisection needs inside the bracket
    doublings = math.ceil(math.log2(boundary / 16)) + 1
    assert len(loads) <= doublings + bisection + 1


def test_interpolation_beats_bisection_on_a_smooth_curve():
    b = Bracket(spec(precision="2%"))
    loads = run_search(b, lambda x: ttft_p99(x, 300.0))
    inside = [x for x in loads if 256 < x < 512]  # the bracket after doubling: 256-512
    assert len(inside) < math.ceil(math.log2(256 / (0.02 * 300)))  # fewer than plain bisection


def test_noisy_searches_agree_within_their_precision():
    answers = []
    for seed in range(8):
        b = Bracket(spec())
        run_search(b, lambda x: ttft_p99(x, 152.0), noise=0.03, rng=random.Random(seed))
        answers.append(b.answer()["answer"])
    assert all(abs(a / 152.0 - 1) <= 0.10 for a in answers), answers


def test_not_met_at_the_lowest_load():
    b = Bracket(spec(start=8))
    loads = run_search(b, lambda x: 5.0)
    assert loads == [8, 4, 2, 1]
    assert b.status == "not_met"
    assert "not met even at the lowest load" in headline(b.answer())


def test_no_failure_up_to_the_top():
    b = Bracket(spec(start=1024))
    loads = run_search(b, lambda x: 0.1)
    assert loads == [1024, 2048, 4096]
    assert b.status == "no_failure"


def test_rate_search_keeps_fractions():
    b = Bracket(spec("rate", start=0.5))
    loads = run_search(b, lambda x: ttft_p99(x, 3.3))
    assert any(x != int(x) for x in loads)
    lo, hi = b.answer()["bracket"]
    assert lo <= 3.3 < hi and b.status == "converged"


def qps_curve(load: float) -> float:
    """Closed loop on a server that saturates: Little's law with a service time growing with the
    batch, capped by a plateau (60 req/s)."""
    return min(load / (0.9 + 0.004 * load), 60.0)


def ttft_curve(load: float) -> float:
    """TTFT p99 flat at 200 ms until the KV cache fills at 150 users, then a queue: +20 ms a user."""
    return 0.2 + 0.02 * max(0.0, load - 150)


def test_knee_finds_where_qps_stops_growing_while_latency_climbs():
    b = Bracket(spec("knee", start=16))
    loads = []
    while (load := b.next_load()) is not None:
        loads.append(load)
        b.record(Probe(len(loads) - 1, load, True, qps_curve(load), ttft_curve(load), None, 10.0, "stable"))
        assert len(loads) < 30
    # QPS reaches 90% of its plateau at 62 users, but TTFT p99 doubles (to 400 ms) only at 160
    lo, hi = b.answer()["bracket"]
    assert lo < 160 <= hi and b.status == "converged"
    assert hi - lo <= 0.05 * lo
    assert b.answer()["answer"] == hi
    assert qps_curve(hi) >= KNEE_SHARE * 60
    assert "knee" in headline(b.answer())


def test_no_knee_without_a_latency_climb():
    """QPS plateaus but TTFT never climbs (no queue): no knee, and the search stops within 4x of
    the plateau's start instead of doubling to the top."""
    b = Bracket(spec("knee", start=16))
    loads = []
    while (load := b.next_load()) is not None:
        loads.append(load)
        b.record(Probe(len(loads) - 1, load, True, qps_curve(load), 0.2, None, 10.0, "stable"))
    assert b.status == "no_failure" and max(loads) <= 4 * 128, loads
    assert "no knee" in headline(b.answer())


def test_quantile_interval_covers_the_true_p99():
    rng = random.Random(7)
    true_p99 = -math.log(0.01)  # exponential(1)
    covered, widths = 0, []
    for _ in range(200):
        sk = LatencyStats()
        sk.extend([rng.expovariate(1.0) for _ in range(2000)])
        lo, hi = quantile_ci(sk, 0.99)
        covered += lo <= true_p99 <= hi
        widths.append(hi - lo)
    assert 0.88 <= covered / 200 <= 0.995  # a 95% interval (plus the sketch's 0.5%)
    small = LatencyStats()
    small.extend([rng.expovariate(1.0) for _ in range(200)])
    lo, hi = quantile_ci(small, 0.99)
    assert hi - lo > sum(widths) / len(widths)  # fewer samples, wider interval


def test_measure_decides_only_when_the_interval_clears_the_threshold():
    rng = random.Random(3)
    sk = LatencyStats()
    sk.extend([rng.uniform(0.1, 0.5) for _ in range(1000)])
    block = {"ttft_s": {"p99": sk.quantile(0.99)}, "requests": 1000, "failures": {}}
    (far,) = slo.parse("ttft_p99<=800ms")
    m = measure(far, block, {"ttft": sk})
    assert m.ok and m.decided and m.ratio < 1
    (near,) = slo.parse("ttft_p99<=0.496s")
    m = measure(near, block, {"ttft": sk})
    assert not m.decided
    (below,) = slo.parse("ttft_p99<=100ms")
    m = measure(below, block, {"ttft": sk})
    assert not m.ok and m.decided and m.ratio > 1


def M(ok: bool | None, decided: bool, value: float = 1.0, half: float = 0.5) -> Measure:
    return Measure("x", value, value - half, value + half, 1.0, ok, decided)


def test_judge_stage():
    assert not judge_stage([M(False, True)], 500, 1.0, 5.0, 30.0, 0.05).done  # before the minimum
    assert not judge_stage([M(True, True)], MIN_OK - 1, 10.0, 5.0, 30.0, 0.05).done  # too few to pass
    assert judge_stage([M(False, True)], MIN_OK - 1, 10.0, 5.0, 30.0, 0.05).done  # surely failing already
    v = judge_stage([M(True, True), M(False, True)], 500, 6.0, 5.0, 30.0, 0.05)
    assert v.done and v.ok is False and v.why == "decided"
    v = judge_stage([M(True, False)], 500, 6.0, 5.0, 30.0, 0.05)
    assert not v.done  # undecided and wide
    # narrow but straddling the threshold: no verdict yet (the knee's stability test ends it)
    assert not judge_stage([M(True, False, half=0.01)], 500, 6.0, 5.0, 30.0, 0.05).done
    v = judge_stage([M(True, False, half=0.01)], 500, 6.0, 5.0, 30.0, 0.05, stable_ends=True)
    assert v.done and v.why == "stable" and v.ok
    # at its longest, an interval still straddling the threshold is inconclusive, not a pass
    v = judge_stage([M(True, False)], 500, 30.0, 5.0, 30.0, 0.05)
    assert v.done and v.why == "inconclusive" and v.ok is None
    v = judge_stage([M(True, True)], 500, 30.0, 5.0, 30.0, 0.05)
    assert v.done and v.why == "longest" and v.ok


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fast", "ttft_p99<=1s", None, None, None, 16), "bad --search"),
        (("concurrency", None, None, None, None, 16), "needs a criterion"),
        (("knee", "ttft_p99<=1s", None, None, None, 16), "takes no --slo"),
        (("concurrency", "ttft_p99<=1s", None, "60%", None, 16), "below 50%"),
        (("concurrency", "ttft_p99<=1s", None, "x", None, 16), "bad --search-precision"),
        (("concurrency", "ttft_p99<=1s", None, None, "0s", 16), "--search-budget"),
        (("concurrency", None, "95%", None, None, 16), "needs --goodput"),
        (("concurrency", None, "120%", None, None, 16), "at most 100%"),
        (("concurrency", "ttft_p99<=x", None, None, None, 16), "bad SLO"),
    ],
)
def test_bad_input(args, message):
    with pytest.raises(UsageError, match=message):
        SearchSpec.parse(*args)


def test_goodput_criterion_parses():
    s = SearchSpec.parse("concurrency", None, "95%", "10%", "2m", 8, "ttft<=800ms")
    assert s.goodput_min == 0.95 and s.precision == 0.10 and s.budget_s == 120 and s.slo_text is None


def test_overload_guard():
    rising = OverloadGuard(guard_s=20)
    flat_backlog = OverloadGuard(guard_s=20)
    only_backlog = OverloadGuard(guard_s=20)
    for t in range(0, 25):
        rising.add(float(t), 5.0 * t, 0.1 + 0.05 * t)
        flat_backlog.add(float(t), 8.0 + (t % 3), 0.1 + 0.05 * t)
        only_backlog.add(float(t), 5.0 * t, 0.3 + 0.01 * (t % 2))
    assert rising.tripped() and "over-saturated" in rising.why()
    assert not flat_backlog.tripped()
    assert not only_backlog.tripped()
    short = OverloadGuard(guard_s=20)
    for t in range(0, 10):
        short.add(float(t), 5.0 * t, 0.1 + 0.05 * t)
    assert not short.tripped()  # not yet for the guard's whole time
    assert not OverloadGuard(guard_s=0).tripped()


def test_completions_per_worker_reports():
    c = Completions()
    # two workers, 30 and 20 completions/s, reporting every 3 s at different phases
    for k in range(10):
        c.add("a", 3.0 * k, 90)
        c.add("b", 1.5 + 3.0 * k, 60)
    assert c.rate(5.0) == pytest.approx(50.0)
    assert c.rate_halfwidth(5.0) == pytest.approx(0.0)
    assert c.rate(100.0) is None
    one = Completions()
    one.add("a", 0.0, 90)
    one.add("a", 3.0, 90)
    one.add("b", 1.5, 60)
    assert one.rate(0.0) is None  # b has reported once since: not yet (half the rate otherwise)
    one.add("a", 6.0, 90)
    one.add("a", 15.0, 270)  # b silent for 13.5 s while a reports: gone, a alone counts
    assert one.rate(0.0) == pytest.approx(30.0)


def test_goodput_min_reads_the_stage_blocks_share():
    """--goodput-min against the agreed summary key: block["goodput"]["share"] (0..1)."""
    m = goodput_measure({"goodput": {"slo": "ttft<=800ms", "met": 96, "rate": 9.6, "share": 0.96}}, 0.95)
    assert m.ok and m.ratio == pytest.approx(0.95 / 0.96)
    v = judge_stage([m], 500, 6.0, 5.0, 30.0, 0.05)
    assert v.done and v.ok
    m = goodput_measure({"goodput": {"slo": "ttft<=800ms", "met": 90, "rate": 9.0, "share": 0.90}}, 0.95)
    assert m.ok is False and m.ratio > 1
    assert judge_stage([m], 500, 6.0, 5.0, 30.0, 0.05).ok is False
    missing = goodput_measure({"qps": 10.0}, 0.95)  # run without --goodput: no data, never decided
    assert missing.ok is None and not judge_stage([missing], 500, 6.0, 5.0, 30.0, 0.05).done


def test_knee_reads_noisy_plateau_probes_as_plateau():
    """The calibrated simulator's knee run: 256 users read 62.5 QPS, 512 a little less (58.4).
    It is still on the plateau; 256 users' TTFT p99 is 9x 128 users', so the knee lies between
    128 and 256 users."""
    b = Bracket(spec("knee", start=32))
    seen = {32: (32.5, 0.072), 64: (43.6, 0.101), 128: (54.3, 0.162), 256: (62.5, 1.484), 512: (58.4, 5.78)}
    for load in (32, 64, 128, 256, 512):
        qps, ttft = seen[load]
        b.record(Probe(len(b.probes), load, True, qps, ttft, None, 10.0, "stable"))
    assert b.ttft_at(64) == 0.101 and b.ttft_at(96) == pytest.approx((0.101 + 0.162) / 2)
    nxt = b.next_load()
    assert 128 < nxt < 256 and b.bounds()[0].load == 128 and b.bounds()[1].load == 256


def test_knee_is_clear_of_qps_noise():
    """A later run of the simulator: 128 users read a high 56.5 QPS (within 10% of 256 users'
    62.2: on the plateau already). TTFT p99 is not yet twice its value at half the load at 128
    (156 vs 100 ms) or 165 users (193 vs 116), and is at 194 (315 vs 129): the knee is 165-194."""
    b = Bracket(spec("knee", start=32))
    seen = [(32, 32.3, 0.072), (64, 43.8, 0.1), (128, 56.5, 0.156), (256, 62.2, 1.674), (165, 54.6, 0.193)]
    seen += [(194, 58.2, 0.315), (220, 58.9, 0.848)]
    for load, qps, ttft in seen:
        b.record(Probe(len(b.probes), load, True, qps, ttft, None, 10.0, "stable"))
    lo, hi = b.bounds()
    assert (lo.load, hi.load) == (165, 194)


def test_a_probe_cut_before_its_verdict_does_not_narrow_the_bracket() -> None:
    """The budget ended the 184-user stage before it could say pass or fail: the bracket stays
    160-256 (seen as 160-184 in a --goodput-min search whose budget ran out)."""
    spec = SearchSpec.parse("concurrency", "ttft_p99<=800ms", None, "5%", "60s", 64.0, None)
    b = Bracket(spec)
    for load, ok in ((64, True), (128, True), (256, False), (160, True), (184, None)):
        b.record(Probe(0, float(load), ok, 50.0, 0.5, None if ok is None else 0.9, 5.0, "stable"))
    lo, hi = b.bounds()
    assert (lo.load, hi.load) == (160.0, 256.0)
    assert b.probes[-1].bracket == (160.0, 256.0)


# ----------------------------------------------------------------------------- settling, tails


def feed(settling: Settling, start: float, seconds: float, per_s: int, ttft_at) -> None:
    """Answered warm-up requests as the master sees them: `per_s` a second, TTFT `ttft_at(t)`."""
    n, total = 0, 0.0
    for k in range(int(seconds)):
        t = start + k + 1
        n += per_s
        total += per_s * ttft_at(t - start)
        settling.add(t, n, total)


def test_settling_waits_until_the_queue_stops_growing():
    """Stepping up: the TTFT of answered requests climbs for 8 s, then holds. The window may not
    open while it climbs (the probe measured 633 ms at 215 users there), only once two
    consecutive sub-windows agree, and never before one turnover of the users."""
    climbing = Settling(start_s=100.0, need=200)

    def ttft(t: float) -> float:
        return 0.2 + 0.05 * min(t, 8.0)

    feed(climbing, 100.0, 8, 60, ttft)
    assert not climbing.settled(108.0) and climbing.trend() == "rising"
    feed(climbing, 100.0, 20, 60, ttft)  # the same history, longer: flat since 8 s
    assert climbing.settled(120.0) and climbing.trend() == "flat"
    few = Settling(start_s=100.0, need=5000)  # flat, but the users have not turned over yet
    feed(few, 100.0, 20, 60, lambda t: 0.3)
    assert not few.settled(120.0)
    assert not few.timed_out(100.0 + SETTLE_MAX_S - 1) and few.timed_out(100.0 + SETTLE_MAX_S)


def test_settling_sees_a_draining_backlog():
    """Stepping down: the previous stage's queue drains (TTFT 600 -> 200 ms), then holds."""
    s = Settling(start_s=0.0, need=100)
    feed(s, 0.0, 6, 60, lambda t: max(0.2, 0.6 - 0.1 * t))
    assert s.trend() == "falling" and not s.settled(6.0)
    s = Settling(start_s=0.0, need=100)
    feed(s, 0.0, 14, 60, lambda t: max(0.2, 0.6 - 0.1 * t))
    assert s.settled(14.0)


def test_settling_waits_until_the_open_loops_backlog_stops_draining():
    """Open loop, stepping down from an overload: the TTFT falls slowly (less than SETTLE_TOL a
    sub-window) while the server still finishes more than is offered (the backlog drains)."""
    s = Settling(start_s=0.0, need=30)
    feed(s, 0.0, 12, 50, lambda t: 3.0 - 0.02 * t)
    assert s.trend() == "flat" and s.settled(12.0)  # its TTFT looks steady
    s.note_flow(60.8, 53.5)  # the queue left by 80 and 62.5 req/s still drains
    assert not s.settled(12.0) and not s.flowing()
    s.note_flow(None, 53.5)  # no rate read yet
    assert not s.flowing()
    s.note_flow(54.9, 53.5)
    assert s.settled(12.0) and not s.overloaded()
    s.note_flow(60.3, 80.0)  # above the ceiling: the backlog grows (a fail stays a fail, unsettled)
    assert not s.settled(12.0) and s.overloaded()
    assert Settling(start_s=0.0, need=30).flowing()  # nothing noted: a closed loop


def test_settling_sub_windows_stretch_on_a_slow_stage():
    """Two answers a second: a sub-window holds SETTLE_MIN_N answers, not SETTLE_WINDOW_S."""
    s = Settling(start_s=0.0, need=4)
    feed(s, 0.0, SETTLE_MIN_N - 1, 2, lambda t: 0.1)
    assert s.means() is None  # 2 x SETTLE_MIN_N answers not there yet (10 s would hold 2 sub-windows)
    s = Settling(start_s=0.0, need=4)
    feed(s, 0.0, SETTLE_MIN_N, 2, lambda t: 0.1)
    assert s.means() == pytest.approx((0.1, 0.1)) and s.settled(float(SETTLE_MIN_N))


def test_tail_share_reads_waves_not_independent_draws():
    """p99 <= T is "at most 1% above T". A closed loop's answers come in waves: one sub-window has
    none above T, the next 2%. The share (1%) is then undecided; the order-statistics interval
    of the first wave alone (300 answers, all below T) called the stage surely passing."""
    wave = LatencyStats()
    wave.extend([0.74] * 300)
    _low, high = quantile_ci(wave, 0.99)
    assert high <= 0.8  # the old reading: "decided pass" from a few seconds
    tail = TailShare()
    tail.add(0.0, 0, 0)  # the window opens
    n = above = 0
    for k in range(10):
        n += 200
        above += 0 if k % 2 == 0 else 4
        tail.add(SETTLE_WINDOW_S * (k + 1), n, above)
    share, half = tail.interval()
    assert share == pytest.approx(0.01) and half > 0.005  # neither side of 1%
    (o,) = slo.parse("ttft_p99<=800ms")
    m = measure(o, {"ttft_s": {"p99": 0.79}}, {"ttft": wave}, tail=(share, half), tail_judged=True)
    assert not m.decided
    assert not measure(o, {"ttft_s": {"p99": 0.79}}, {"ttft": wave}, tail_judged=True).decided  # no tail yet
    steady = TailShare()
    steady.add(0.0, 0, 0)
    for k in range(8):  # 0.1% above, every sub-window alike: surely passing
        steady.add(SETTLE_WINDOW_S * (k + 1), 1000 * (k + 1), k + 1)
    m = measure(o, {"ttft_s": {"p99": 0.7}}, {"ttft": wave}, tail=steady.interval(), tail_judged=True)
    assert m.decided and m.ok
    # no answer above T yet, too few to say so from the share: the magnitude decides a p99 far below
    quiet = LatencyStats()
    quiet.extend([0.1] * 600)
    none_above = TailShare()
    for k in range(4):
        none_above.add(SETTLE_WINDOW_S * k, 150 * k, 0)
    share, half = none_above.interval()
    assert share == 0 and half > 0.01  # the share alone: inconclusive
    m = measure(o, {"ttft_s": {"p99": 0.1}}, {"ttft": quiet}, tail=(share, half), tail_judged=True)
    assert m.decided and m.ok
    near = LatencyStats()
    near.extend([0.74] * 600)  # the same share, a p99 near T: no verdict
    assert not measure(
        o, {"ttft_s": {"p99": 0.74}}, {"ttft": near}, tail=(share, half), tail_judged=True
    ).decided
    short = TailShare()
    short.add(0.0, 0, 0)
    short.add(SETTLE_WINDOW_S, 500, 0)
    assert short.interval() is None  # one sub-window says nothing of the next


def test_count_above_reads_the_sketch():
    sk = LatencyStats()
    sk.extend([0.1] * 90 + [0.9] * 10)
    assert sk.count_above(0.8) == 10 and sk.count_above(0.05) == 100 and sk.count_above(1.0) == 0


def test_inconclusive_probes_are_not_probed_again_and_narrow_nothing():
    """Loads whose interval straddled the threshold inside the bracket: the search probes beside
    them (the passing side first: the answer is the passing end) and ends noise_limited when both
    gaps are narrower than half the precision; the bracket's ends are measured verdicts."""
    truth = 219.3  # the steady-state crossing; loads within 3 of it are inconclusive

    def verdict(load: float) -> bool | None:
        return None if abs(load - truth) < 3 else load < truth

    for precision, statuses in (("5%", ("converged", "noise_limited")), ("2%", ("noise_limited",))):
        b = Bracket(spec(start=64, precision=precision))
        loads = []
        while (load := b.next_load()) is not None:
            assert load not in loads, loads
            loads.append(load)
            ratio = (load / truth) ** 4
            b.record(Probe(len(loads), load, verdict(load), None, 0.8 * ratio, ratio, 10.0, "decided"))
            assert len(loads) < 20, loads
        assert any(verdict(x) is None for x in loads), loads  # the interpolation landed in the band
        lo, hi = b.bounds()
        assert lo.load < truth < hi.load and lo.ok is True and hi.ok is False
        assert b.status in statuses, (b.status, loads)
        ans = b.answer()
        assert ans["converged"] and ans["answer"] == lo.load and abs(lo.load / truth - 1) <= 0.04
        noted = "loads inside it measured neither pass nor fail" in headline(ans)
        assert noted == (b.status == "noise_limited")
        if b.status == "converged":
            assert hi.load - lo.load <= 0.05 * lo.load
