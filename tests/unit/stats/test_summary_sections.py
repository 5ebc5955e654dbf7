"""The master's sections of summary.json: the stage timeline, prefix shares, replay, client-bound,
SLO verdicts, the search's probes and the breaker, each in its place and absent when it does not apply."""

from __future__ import annotations

from swarm.stats import slo, summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.summary_sections import Sections, add_sections, search_with_stage_figures
from tests.helpers.synthetic import synthetic_records


def _summary():
    agg = Aggregate()
    for r in synthetic_records(200, workloads=("a",), stages=(0, 1)):
        agg.add(r)
    return summary.build(agg, run_id="r")


def test_nothing_added_without_facts():
    s = _summary()
    keys = list(s)
    add_sections(s, Sections())
    assert list(s) == keys


def test_every_section_in_summary_json_key_order():
    s = _summary()
    objective = slo.parse("a.ttft_p99<10s")[0]
    sections = Sections(
        timeline=[
            {"index": 0, "users": 4, "start_wall_s": 1.0, "end_wall_s": 2.0, "warmup_s": 0.5, "rate": None},
            {
                "index": 1,
                "users": 8,
                "start_wall_s": 2.0,
                "end_wall_s": None,
                "warmup_s": 0.0,
                "rate": 3.0,
                "ended_by": "search",
                "settled": False,
            },
        ],
        prefix_shares={"a": 0.5},
        trace_replay={"rows": 3, "implied_prefix_hit_rate": 0.25},
        replay_workload="trace",
        client_bound={1: ("w-2", 93.456), 0: ("w-1", 91.0)},
        verdicts=[slo.Verdict(objective, 1.0)],
        search={"probes": [{"stage": 1, "qps": None}, {"stage": 0, "qps": 7.0}], "headline": "h"},
        aborted={"reason": "why"},
    )
    add_sections(s, sections)
    assert list(s)[-7:] == [
        "stage_timeline",
        "trace_replay",
        "intended_prefix_share",
        "client_bound",
        "slo",
        "search",
        "aborted",
    ]
    first, second = s["stages"]
    assert (first["users"], first["start_s"], first["end_s"], first["rate"]) == (4, 1.0, 2.0, None)
    assert "ended_by" not in first and "settled" not in first
    assert "sent_rate" not in first  # closed loop: no rate asked, none sent to compare
    # open loop: the rate it sent, beside the rate asked
    assert second["sent_rate"] == second["total"]["requests"] / second["duration_s"] > 0
    assert (second["ended_by"], second["settled"]) == ("search", False)
    assert s["intended_prefix_share"] == {"a": 0.5, "trace": 0.25}
    assert s["client_bound"] == [
        {"stage": 0, "worker": "w-1", "cpu_percent": 91.0},
        {"stage": 1, "worker": "w-2", "cpu_percent": 93.5},
    ]
    assert s["slo"][0]["ok"] is True and s["slo"][0]["objective"] == "a.ttft_p99<10s"
    assert s["search"]["probes"][0]["qps"] == s["stages"][1]["total"]["qps"]  # the stage's, since none live
    assert s["search"]["probes"][1]["qps"] == 7.0  # what the search judged live stays
    assert s["aborted"] == {"reason": "why"}


def test_search_probes_of_an_unknown_stage_stay_as_they_are():
    s = _summary()
    search = {"probes": [{"stage": 9, "qps": None}]}
    assert search_with_stage_figures(search, s)["probes"] == [{"stage": 9, "qps": None}]
    assert search_with_stage_figures({}, s)["probes"] == []


def test_a_busted_prefix_implies_no_hits():
    s = _summary()
    add_sections(s, Sections(prefix_shares={"a": 0.5}, prefix_bust=True))
    assert s["intended_prefix_share"] == {"a": 0.0} and s["prefix_cache_mode"] == "bust"
    kept = _summary()
    add_sections(kept, Sections(prefix_shares={"a": 0.5}))
    assert kept["intended_prefix_share"] == {"a": 0.5} and "prefix_cache_mode" not in kept
