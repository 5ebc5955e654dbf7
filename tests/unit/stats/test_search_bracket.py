"""The search (swarm/stats/search_bracket.py) on made-up servers: curves with a known answer."""

from __future__ import annotations

import json
import math
import random

import pytest

from swarm.stats import summary_shape
from swarm.stats.search_bracket import KNEE_SHARE, Bracket, Probe, headline
from swarm.stats.search_spec import SearchSpec


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
    assert summary_shape.problem({"search": json.loads(json.dumps(ans))}) is None  # summary.json's type
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


def test_a_knee_probe_without_a_qps_reading_says_nothing_of_growth():
    """A stage too short for two reports of each worker reads no QPS (None). Such a probe neither
    shows the plateau in sight (a doubling from 8.0 QPS to an unread one is no stall) nor starts
    the plateau; read as 0 QPS it did both, and the knee search on a 5-sequence KV pool doubled
    to 512 users and answered 208 where QPS was flat from 8."""
    b = Bracket(spec("knee", start=2))
    b.record(Probe(0, 4.0, True, 8.0, 0.022, None, 5.0, "longest"))
    b.record(Probe(1, 8.0, True, None, 0.616, None, 5.0, "longest"))
    assert not b._saturated_seen() and b.next_load() == 16
    unread = Bracket(spec("knee", start=2))
    for i, (load, ttft) in enumerate([(2, 0.020), (4, 0.022), (8, 0.616), (16, 1.215)]):
        unread.record(Probe(i, float(load), True, None, ttft, None, 5.0, "longest"))
    # no QPS read: every load still scales (no plateau yet), whatever its TTFT
    assert unread._plateau_start() is None
    assert all(unread.passes(p) for p in unread.probes) and unread.next_load() == 32


def test_knee_on_a_small_kv_pool_is_one_past_what_it_holds():
    """The live search's probes on a 5-sequence KV pool (the diagnosis matrix's server with
    1,600 KV tokens, 256 + 64-token requests), each with its QPS read: the knee is 6 users (5-6)."""
    b = Bracket(spec("knee", start=2))
    seen = {2: (4.66, 0.0195), 4: (7.99, 0.0295), 8: (8.33, 0.616), 6: (8.33, 0.413), 5: (8.33, 0.0292)}
    loads = []
    while (load := b.next_load()) is not None:
        loads.append(load)
        qps, ttft = seen[int(load)]
        b.record(Probe(len(loads) - 1, load, True, qps, ttft, None, 6.0, "longest"))
    assert loads == [2, 4, 8, 6, 5] and b.status == "converged"
    assert b.answer()["answer"] == 6 and b.answer()["bracket"] == [5, 6]
