"""Diagnosis on hand-built stage tables reproducing the seed's numbers (REFERENCE.md §1)."""

from __future__ import annotations

from swarm.analysis.client_server import TtftComparison, compare_window
from swarm.analysis.diagnosis import (
    StageRow,
    capped_stages,
    cause_at,
    client_bound,
    diagnose,
    reconcile_totals,
    saturation,
    slo_max_concurrency,
)
from swarm.analysis.server_metrics import Histogram, StageServerStats
from swarm.core.buckets import VLLM_TTFT_BUCKETS as TTFT_BUCKETS
from swarm.stats.cpu import ClientLoad

SHORT_QA = [
    (10, 13.4, 0.168),
    (30, 28.1, 0.193),
    (64, 45.2, 0.292),
    (128, 60.2, 0.419),
    (200, 64.9, 0.727),
    (256, 64.7, 0.843),
]
CHAT = [(10, 4.7, 0.172), (30, 15.1, 0.209), (64, 22.9, 0.255), (128, 29.1, 0.458), (200, 32.2, 0.694)]


def rows(table, t0=1000.0, stage_s=30.0):
    out = []
    for i, (users, qps, p99) in enumerate(table):
        block = {
            "requests": int(qps * stage_s),
            "failures": {},
            "qps": qps,
            "ttft_s": {"p50": p99 / 2, "p99": p99},
            "e2e_s": {"p99": p99 * 8},
        }
        out.append(
            StageRow(
                stage=i,
                users=users,
                start_s=t0 + i * stage_s,
                end_s=t0 + (i + 1) * stage_s,
                duration_s=stage_s,
                requests=block["requests"],
                qps=qps,
                ttft_p50=p99 / 2,
                ttft_p99=p99,
                entry={"stage": i, "total": block},
            )
        )
    return out


def test_short_qa_plateau_between_200_and_256():
    f = saturation(rows(SHORT_QA))
    assert f.kind == "saturation" and f.stage == 4  # the 200-user stage is the ceiling
    assert "200 users" in f.text and "256 users" in f.text and "64.9 -> 64.7" in f.text
    assert "727 ms -> 843 ms" in f.text


def test_chat_has_no_ceiling_yet():
    f = saturation(rows(CHAT))
    assert f.kind == "no_saturation" and "+10.7%" in f.text
    assert saturation(rows(CHAT[:1])) is None  # one stage: nothing to compare


def stats(stage, **kw):
    s = StageServerStats(stage=stage, samples=30, duration_s=30.0)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def test_round_1_names_the_max_num_seqs_cap():
    """Seed round 1: max-num-seqs=64, running pinned at 64, KV 25%, requests waiting."""
    r = rows([(10, 1.8, 6.9), (30, 5.3, 0.223), (64, 8.7, 0.334), (128, 8.8, 0.9)])
    server = {
        0: stats(
            0, running_mean=10, running_max=10, running_pinned=0.9, waiting_mean=0, kv_mean=0.05, kv_max=0.06
        ),
        1: stats(
            1, running_mean=30, running_max=30, running_pinned=0.9, waiting_mean=0, kv_mean=0.12, kv_max=0.13
        ),
        2: stats(
            2,
            running_mean=63.8,
            running_max=64,
            running_pinned=0.95,
            waiting_mean=0.4,
            kv_mean=0.25,
            kv_max=0.26,
        ),
        3: stats(
            3,
            running_mean=64,
            running_max=64,
            running_pinned=1.0,
            waiting_mean=63.5,
            kv_mean=0.25,
            kv_max=0.27,
            preemptions=0,
        ),
    }
    found = diagnose(r, server)
    cap = [f for f in found if f.kind == "max_num_seqs_cap"]
    # at 64 users running == users (the client's own limit); at 128 the cap shows: 64 run, 63.5 wait
    assert len(cap) == 1 and cap[0].stage == 3
    assert "pinned at 64" in cap[0].text and "25%" in cap[0].text and "--max-num-seqs" in cap[0].text
    assert "128 users" in cap[0].text and "63.5 waited" in cap[0].text
    assert not [f for f in found if f.kind in ("kv_bound", "compute_bound")]
    assert [f.stage for f in found if f.kind == "saturation"] == [2]


def test_kv_96_with_preemptions_names_kv():
    r = rows(SHORT_QA)
    server = {
        i: stats(
            i,
            running_mean=u * 0.95,
            running_max=u,
            running_pinned=0.3,
            waiting_mean=0.0,
            kv_mean=0.3,
            kv_max=0.35,
            preemptions=0,
        )
        for i, (u, _, _) in enumerate(SHORT_QA)
    }
    server[4] = stats(
        4,
        running_mean=241,
        running_max=250,
        running_pinned=0.4,
        waiting_mean=2,
        kv_mean=0.93,
        kv_max=0.96,
        preemptions=37,
    )
    server[5] = stats(
        5,
        running_mean=241,
        running_max=251,
        running_pinned=0.4,
        waiting_mean=15,
        kv_mean=0.95,
        kv_max=0.97,
        preemptions=120,
    )
    kinds = {f.kind: f for f in diagnose(r, server)}
    kv = kinds["kv_bound"]
    assert kv.stage == 4 and "96%" in kv.text and "37 preemptions" in kv.text and "max-model-len" in kv.text
    assert "compute_bound" not in kinds and "max_num_seqs_cap" not in kinds


def test_neither_cap_nor_kv_at_the_ceiling_is_compute_bound():
    r = rows(SHORT_QA)
    server = {
        i: stats(
            i,
            running_mean=u * 0.9,
            running_max=u,
            running_pinned=0.2,
            waiting_mean=0.0,
            kv_mean=0.5,
            kv_max=0.6,
            preemptions=0,
            generation_tok_s=2000.0,
        )
        for i, (u, _, _) in enumerate(SHORT_QA)
    }
    [f] = [f for f in diagnose(r, server) if f.kind == "compute_bound"]
    assert f.stage == 4 and "2,000" in f.text and "60%" in f.text


def test_client_cpu_over_90_flags_the_stage_untrusted():
    r = rows(SHORT_QA)
    cpu = ClientLoad.from_lines(
        {
            "ts": 1030.0 + 30 * s,
            "worker": w,
            "stage": s,
            "cpu_s": 29.7 if (w, s) == ("worker-1", 5) else 12.0,
            "wall_s": 30.0,
        }
        for s in range(6)
        for w in ("worker-0", "worker-1")
    )  # worker-1 at 99% in stage 5, the rest at 40%
    found = client_bound(r, cpu)
    assert [f.stage for f in found] == [5] and not found[0].trusted
    assert "worker-1" in found[0].text and "not trusted" in found[0].text
    sat = saturation(r, {5})
    assert not sat.trusted and "CPU-bound" in sat.text


def test_without_cpu_samples_the_workers_own_reports_flag_the_stage():
    r = rows(SHORT_QA)
    reported = [{"stage": 5, "worker": "worker-1", "cpu_percent": 97.3}]
    found = [f for f in diagnose(r, bound_reported=reported) if f.kind == "client_bound"]
    assert [(f.stage, f.trusted) for f in found] == [
        (5, False)
    ] and "97% of a core (its own reports)" in found[0].text
    sat = [f for f in diagnose(r, bound_reported=reported) if f.kind == "saturation"]
    assert sat and not sat[0].trusted
    # samples, where there are some, decide: here nobody is busy
    calm = ClientLoad()
    for s in range(6):
        calm.add("worker-1", [[s, 12.0, 30.0]])  # [[stage, cpu_s, wall_s]]: 40%
    assert not [f for f in diagnose(r, cpu=calm, bound_reported=reported) if f.kind == "client_bound"]


def test_slo_max_concurrency():
    r = rows(SHORT_QA)
    f = slo_max_concurrency(r, "ttft_p99<=800ms")
    assert f.stage == 4 and "200 users" in f.text and "256 users" in f.text and "FAIL" in f.text
    f = slo_max_concurrency(r, "ttft_p99<=100ms")
    assert f.stage is None and "No stage meets" in f.text


def test_totals_reconciliation():
    total = {"requests": 1000, "failures": {"timeout": 50}, "output_tokens": 50_000}
    run = stats(-1, requests=948.0, generation_tokens=50_100.0)
    texts = [f.text for f in reconcile_totals(run, total)]
    assert "reconcile" in texts[0] and "reconcile" in texts[1]
    run = stats(-1, requests=1000.0, generation_tokens=60_000.0)
    texts = [f.text for f in reconcile_totals(run, total)]
    assert "marked them failed" in texts[0] and "20.0% more" in texts[1]
    run = stats(-1, requests=900.0, generation_tokens=50_000.0)
    assert "lost data on the server side" in reconcile_totals(run, total)[0].text


def _pair(stage: int, client_ttfts: list[float], engine_ttfts: list[float]) -> TtftComparison:
    """A comparison from per-request TTFTs: the server's histogram built from the engine's."""
    bounds = (*TTFT_BUCKETS, float("inf"))
    cum = [float(sum(v <= b for v in engine_ttfts)) for b in bounds]
    hist = Histogram(bounds, tuple(cum), sum(engine_ttfts), float(len(engine_ttfts)))
    return compare_window(stage, 0.0, 1.0, client_ttfts, hist)


def _gap_run(gaps_s: list[float], share: list[float] | None = None):
    """Three stages of 64/128/256 users; engine TTFT 100-300 ms; the client's = engine's + gap."""
    r = rows([(64, 40.0, 0.2), (128, 60.0, 0.4), (256, 61.0, 0.9)])
    engine = [[0.1 + 0.002 * i for i in range(100)] for _ in r]
    pairs = {i: _pair(i, [e + gaps_s[i] for e in engine[i]], engine[i]) for i in range(len(r))}
    share = share or [0.95, 0.95, 0.95]
    server = {
        i: stats(
            i,
            running_mean=share[i] * row.users,
            running_max=share[i] * row.users,
            running_pinned=0.3,
            waiting_mean=0.0,
            kv_max=0.3,
        )
        for i, row in enumerate(r)
    }
    return r, server, pairs


def kinds_of(found) -> set[str]:
    return {f.kind for f in found}


def test_a_gap_growing_with_load_is_the_front_end_and_not_compute():
    r, server, pairs = _gap_run([0.002, 0.03, 0.4], share=[0.95, 0.8, 0.5])
    found = diagnose(r, server, ttft_pairs=pairs)
    [f] = [f for f in found if f.kind == "frontend_bound"]
    assert f.stage == 2 and f.trusted and "400 ms at 256 users" in f.text and "--api-server-count" in f.text
    assert not kinds_of(found) & {"compute_bound", "outside_engine", "network_delay", "kv_bound"}
    # the same gap where the worker's CPU was over the bar: the client's, not the server's
    load = ClientLoad.from_lines([{"ts": 0, "worker": "w1", "stage": 2, "cpu_s": 9.7, "wall_s": 10.0}])
    found = diagnose(r, server, ttft_pairs=pairs, cpu=load)
    assert "client_bound" in kinds_of(found)
    assert not kinds_of(found) & {"frontend_bound", "compute_bound", "outside_engine"}


def test_a_steady_gap_is_network_delay_and_a_small_one_nothing():
    r, server, pairs = _gap_run([0.05, 0.051, 0.052])
    found = diagnose(r, server, ttft_pairs=pairs)
    [f] = [f for f in found if f.kind == "network_delay"]
    assert "50 ms to 52 ms" in f.text and "frontend_bound" not in kinds_of(found)
    r, server, pairs = _gap_run([0.001, 0.004, 0.012])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert not kinds_of(found) & {"network_delay", "frontend_bound"}
    [f] = [f for f in found if f.kind == "client_vs_server" and "engine's" in f.text]
    assert "1 ms to 12 ms" in f.text and "no bottleneck" in f.text
    # the demo's case: the engine held its users at the plateau: compute (no cap, no KV)
    assert "compute_bound" in kinds_of(found)


def test_a_plateau_the_engine_does_not_hold_is_outside_it():
    r, server, pairs = _gap_run([0.001, 0.004, 0.012], share=[0.9, 0.5, 0.3])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert "outside_engine" in kinds_of(found) and "compute_bound" not in kinds_of(found)


def test_client_below_server_is_no_measurement():
    r, server, pairs = _gap_run([-0.02, -0.02, -0.02])
    found = [f for f in diagnose(r, server, ttft_pairs=pairs) if f.kind == "client_vs_server"]
    assert not found[0].trusted and "clocks" in found[0].text


def test_same_requests_and_bucket_widths():
    engine = [0.3 + 0.01 * i for i in range(100)]  # 300-1290 ms: buckets 0.25-0.5 ... 1.0-2.5
    p = _pair(0, [e + 0.003 for e in engine], engine)
    assert p.same_requests and abs(p.mean_gap - 0.003) < 1e-9
    assert p.server.buckets["p99"] == (1.0, 2.5) and p.width("p99") == 1.5
    # the client's exact p99 sits in the server's bucket: the interpolated gap is within its width
    assert -p.width("p99") <= p.gap("p99") <= p.width("p99")
    assert not _pair(0, engine[:50], engine).same_requests  # half the requests: not comparable


def test_no_server_metrics_is_said():
    kinds = [f.kind for f in diagnose(rows(SHORT_QA), {})]
    assert "no_server_metrics" in kinds and "saturation" in kinds


def test_a_pinned_level_that_more_users_exceed_is_no_cap():
    """Compute-bound with long steps: at 4 users 3 ran and 1.2 waited out the step (pinned-looking),
    at 16 users 14 ran: no scheduler cap holds that level. A real cap (round 1) holds at 64."""
    r = rows([(4, 25.0, 0.1), (16, 28.4, 0.4), (32, 28.0, 0.9)])
    server = {
        0: stats(0, running_mean=3, running_max=3, running_pinned=0.9, waiting_mean=1.2, kv_max=0.1),
        1: stats(1, running_mean=13, running_max=14, running_pinned=0.5, waiting_mean=1.5, kv_max=0.3),
        2: stats(2, running_mean=30, running_max=31, running_pinned=0.6, waiting_mean=1.0, kv_max=0.5),
    }
    assert capped_stages(r, server) == set()
    found = {f.kind for f in diagnose(r, server)}
    assert "max_num_seqs_cap" not in found and "compute_bound" in found
    server[1].running_max = server[2].running_max = 3.0
    server[1].running_pinned = server[2].running_pinned = 0.95
    assert capped_stages(r, server) == {0, 1, 2}
    # the matrix's compute run: only the last stage looks pinned (27 of 32, 5.7 waiting), but 4 and
    # 16 users, loads a cap of 27 would admit whole, queued too: compute, not a cap
    server = {
        0: stats(0, running_mean=2.5, running_max=3, running_pinned=1.0, waiting_mean=1.5, kv_max=0.01),
        1: stats(1, running_mean=12, running_max=14, running_pinned=0.25, waiting_mean=4.0, kv_max=0.01),
        2: stats(2, running_mean=26.3, running_max=27, running_pinned=1.0, waiting_mean=5.7, kv_max=0.01),
    }
    assert capped_stages(r, server) == set()
    assert "max_num_seqs_cap" not in {f.kind for f in diagnose(r, server)}


def test_the_search_answer_takes_the_same_cause_as_the_diagnosis():
    r, server, pairs = _gap_run([0.002, 0.03, 0.4], share=[0.95, 0.8, 0.5])
    assert cause_at(r, server, 2, ttft_pairs=pairs).kind == "frontend_bound"
    assert cause_at(r, server, 0, ttft_pairs=pairs).kind == "compute_bound"  # below the front-end's rise
    r, server, pairs = _gap_run([0.001, 0.004, 0.012], share=[0.9, 0.5, 0.3])
    assert cause_at(r, server, 2, ttft_pairs=pairs).kind == "outside_engine"
    load = ClientLoad.from_lines(
        [{"ts": 0, "worker": "w1", "stage": 2, "cpu_s": 2.5, "wall_s": 10.0, "wait_s": 7.0}]
    )
    f = cause_at(r, server, 2, ttft_pairs=pairs, cpu=load)
    assert f.kind == "client_bound" and not f.trusted and "waiting for one" in f.text
