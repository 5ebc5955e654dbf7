"""The server's bottleneck at the ceiling: the scheduler's cap, the KV cache, compute, outside the
engine; and one stage's cause (a search's answer) by the same rules."""

from __future__ import annotations

from swarm.analysis.bottleneck import capped_stages, cause_at
from swarm.analysis.diagnosis import diagnose
from swarm.stats.cpu import ClientLoad
from tests.helpers.sweep_run import SHORT_QA
from tests.unit.analysis.helpers import gap_run, kinds_of, rows, stats


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


def test_a_plateau_the_engine_does_not_hold_is_outside_it():
    r, server, pairs = gap_run([0.001, 0.004, 0.012], share=[0.9, 0.5, 0.3])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert "outside_engine" in kinds_of(found) and "compute_bound" not in kinds_of(found)


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
    r, server, pairs = gap_run([0.002, 0.03, 0.4], share=[0.95, 0.8, 0.5])
    assert cause_at(r, server, 2, ttft_pairs=pairs).kind == "frontend_bound"
    assert cause_at(r, server, 0, ttft_pairs=pairs).kind == "compute_bound"  # below the front-end's rise
    r, server, pairs = gap_run([0.001, 0.004, 0.012], share=[0.9, 0.5, 0.3])
    assert cause_at(r, server, 2, ttft_pairs=pairs).kind == "outside_engine"
    load = ClientLoad.from_lines(
        [{"ts": 0, "worker": "w1", "stage": 2, "cpu_s": 2.5, "wall_s": 10.0, "wait_s": 7.0}]
    )
    f = cause_at(r, server, 2, ttft_pairs=pairs, cpu=load)
    assert f.kind == "client_bound" and not f.trusted and "waiting for one" in f.text


def test_a_cap_admits_lower_loads_with_only_the_arrivals_between_two_steps_waiting():
    """The calibrated simulator at seed round 1's flags (--max-num-seqs 64 --max-model-len 65536
    --gpu-memory-utilization 0.90, short_qa, sweep 32,60,96,146): below the cap 0.85 of 32 and 1.8
    of 60 wait for the next step (under 10% of the users), above it 64 run and the rest wait. That is
    the scheduler's cap (the seed's reading), not compute."""
    r = rows([(32, 30.1, 0.070), (60, 41.8, 0.099), (96, 44.4, 1.015), (146, 41.9, 2.328)])
    server = {
        0: stats(0, running_mean=31.0, running_max=32, running_pinned=0.65, waiting_mean=0.85, kv_max=0.18),
        1: stats(1, running_mean=58.1, running_max=59, running_pinned=0.79, waiting_mean=1.79, kv_max=0.32),
        2: stats(2, running_mean=63.6, running_max=64, running_pinned=0.95, waiting_mean=31.2, kv_max=0.35),
        3: stats(3, running_mean=64.0, running_max=64, running_pinned=1.0, waiting_mean=81.9, kv_max=0.35),
    }
    assert capped_stages(r, server) == {2, 3}
    assert cause_at(r, server, 2).kind == "max_num_seqs_cap"
    found = {f.kind for f in diagnose(r, server)}
    assert "max_num_seqs_cap" in found and "compute_bound" not in found


def test_a_spawn_wave_one_scrape_caught_below_the_cap_is_no_queue():
    """`swarm tune --guided` from round 1, its second configuration (--max-num-seqs 128, short_qa,
    sweep 48,96,160 of 8 s): 0.34 s into the first stage one scrape caught the 48 users' first
    requests before the engine's next step admitted them (1 running, 40 waiting); the other seven
    saw 0-3. That scrape made the stage's mean queue 6.5 (over 10% of 48), and the cap at 160 users
    (128 running, 32 waiting, KV 70%) was refused as compute. The queue most of the stage held, the
    median, is 2: the cap."""
    r = rows([(48, 35.9, 0.082), (96, 47.4, 0.129), (160, 54.9, 0.919)])
    server = {
        0: stats(0, running_mean=40.4, running_max=47, running_pinned=0.625, waiting_mean=6.5, kv_max=0.26),
        1: stats(1, running_mean=92.5, running_max=95, running_pinned=0.5, waiting_mean=2.0, kv_max=0.52),
        2: stats(2, running_mean=128, running_max=128, running_pinned=1.0, waiting_mean=31.6, kv_max=0.70),
    }
    assert capped_stages(r, server) == set()  # by the mean: the wave reads as a queue below the cap
    server[0].waiting_median = 2.0
    assert capped_stages(r, server) == {2}
    assert "max_num_seqs_cap" in {f.kind for f in diagnose(r, server)}


def test_a_queue_at_exactly_the_cap_is_the_release_race_not_compute():
    """llama-server with 2 slots, sweep 1,2,6 (tests/e2e/test_llamacpp_real.py): at 2 users every slot
    is taken and an arrival can wait for the slot its own user's last request is releasing; one such
    request is half the users. That queue is no evidence against the cap (the fresh-clone CI of stop
    48 read it as compute and named no cap); a queue at 1 user, below the level, still is."""
    r = rows([(1, 14.5, 0.03), (2, 18.5, 0.04), (6, 19.2, 0.39)])
    server = {
        0: stats(0, running_mean=0.6, running_max=1, running_pinned=1.0, waiting_mean=0.0, kv_max=None),
        1: stats(1, running_mean=2.0, running_max=2, running_pinned=1.0, waiting_mean=0.6, kv_max=None),
        2: stats(2, running_mean=2.0, running_max=2, running_pinned=1.0, waiting_mean=3.8, kv_max=None),
    }
    server[1].waiting_median = 1.0
    assert capped_stages(r, server) == {2}
    assert "max_num_seqs_cap" in {f.kind for f in diagnose(r, server)}
    server[0].waiting_median = server[0].waiting_mean = 1.0
    assert capped_stages(r, server) == set()
