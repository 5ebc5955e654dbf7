"""Diagnosis on hand-built stage tables reproducing the seed's numbers (REFERENCE.md §1)."""

from __future__ import annotations

from swarm.analysis.diagnosis import (
    StageRow,
    client_bound,
    client_vs_server,
    diagnose,
    saturation,
    slo_max_concurrency,
)
from swarm.analysis.server_metrics import StageServerStats
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
    assert [(f.stage, f.trusted) for f in found] == [(5, False)] and "97% CPU (its own reports)" in found[
        0
    ].text
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


def test_client_vs_server_gap_and_reconciliation():
    r = rows(SHORT_QA[:3])
    server = {
        i: stats(i, latency={"ttft": {"p50": row.ttft_p50 - 0.012, "p99": row.ttft_p99 - 0.015}})
        for i, row in enumerate(r)
    }
    total = {"requests": 1000, "failures": {"timeout": 50}, "output_tokens": 50_000}
    run = stats(-1, requests=948.0, generation_tokens=50_100.0)
    texts = [f.text for f in client_vs_server(r, server, run, total)]
    assert "12 ms to 12 ms" in texts[0] and "no trend" in texts[0]
    assert "reconcile" in texts[1] and "reconcile" in texts[2]
    run = stats(-1, requests=1000.0, generation_tokens=60_000.0)
    texts = [f.text for f in client_vs_server(r, server, run, total)]
    assert "marked them failed" in texts[1] and "20.0% more" in texts[2]
    run = stats(-1, requests=900.0, generation_tokens=50_000.0)
    assert "lost data on the server side" in client_vs_server(r, server, run, total)[1].text
    # a gap growing with load, with a busy client
    server[2].latency["ttft"]["p50"] = r[2].ttft_p50 - 0.2
    f = client_vs_server(r, server, None, total, {2: 97.0})[0]
    assert "grows with load" in f.text and "the client" in f.text


def test_no_server_metrics_is_said():
    kinds = [f.kind for f in diagnose(rows(SHORT_QA), {})]
    assert "no_server_metrics" in kinds and "saturation" in kinds
