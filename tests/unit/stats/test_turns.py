"""Per-turn statistics of conversations: bucketed by turn (1, 2, 3, 4+), merged exactly across
workers through the wire, in summary.json, /metrics and the LLM tab; records without a turn stay out."""

from __future__ import annotations

import math
import random

import msgpack
import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.core.records import Outcome, RequestRecord, turn_bucket
from swarm.live.exporter import ExportState, render
from swarm.live.webui import rows
from swarm.stats import summary
from swarm.stats.aggregate import WIRE_VERSION, Aggregate


def conversation_records(n: int = 400, seed: int = 3) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turn = rng.randint(1, 7) if i % 5 else None  # every 5th request is not a conversation turn
        draw = rng.random()
        ok = draw < 0.85
        out.append(
            RequestRecord(
                workload="chat_session" if turn else "short_qa",
                start_wall_s=1_700_000_000.0 + i * 0.05,
                outcome=Outcome.OK if ok else Outcome.TIMEOUT if draw < 0.93 else Outcome.CANCELLED,
                ttft_s=rng.lognormvariate(math.log(0.05 * (turn or 1)), 0.3) if ok else None,
                e2e_s=rng.uniform(0.5, 2.0),
                prompt_tokens=100 * (turn or 1) + rng.randint(0, 50),
                output_tokens=rng.randint(1, 64),
                warmup=rng.random() < 0.05,
                session_id=f"s{i // 4}" if turn else None,
                turn=turn,
            )
        )
    return out


def via_workers(records: list[RequestRecord], cut_per_worker: int = 2, workers: int = 3) -> Aggregate:
    master = Aggregate()
    parts = [Aggregate() for _ in range(workers)]
    for i, r in enumerate(records):
        parts[i % workers].add(r)
    for p in parts:
        p.turns.cut += cut_per_worker
        wire = msgpack.unpackb(msgpack.packb(p.take_delta().to_wire()), raw=False)
        assert wire["v"] == WIRE_VERSION == 9
        master.merge(Aggregate.from_wire(wire))
    return master


def test_turn_buckets_are_bounded():
    assert [turn_bucket(t) for t in (1, 2, 3, 4, 5, 99)] == ["1", "2", "3", "4+", "4+", "4+"]


def test_merged_turns_equal_the_records_exactly():
    records = conversation_records()
    agg = via_workers(records)
    assert agg.turns.cut == 6
    for key in ("1", "2", "3", "4+"):
        mine = [r for r in records if r.turn is not None and turn_bucket(r.turn) == key]
        ok = [r for r in mine if r.ok]
        c = agg.turns.cells[key]
        cancelled = sum(r.outcome is Outcome.CANCELLED for r in mine)
        assert (c.requests, c.ok, c.cancelled) == (len(mine), len(ok), cancelled) and mine and cancelled
        assert c.prompt_tokens == sum(r.prompt_tokens for r in ok)
        assert c.output_tokens == sum(r.output_tokens for r in ok)
        ttfts = [r.ttft_s for r in ok if not r.warmup]
        assert c.ttft.count == len(ttfts) and c.ttft.sum == pytest.approx(math.fsum(ttfts), rel=1e-12)
    assert sum(c.requests for c in agg.turns.cells.values()) == sum(r.turn is not None for r in records)


def test_no_conversation_no_turns_on_the_wire_or_in_the_summary():
    agg = Aggregate()
    for r in conversation_records():
        if r.turn is None:
            agg.add(r)
    assert "turns" not in agg.to_wire()
    assert "sessions" not in summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_030.0)
    assert not [r for r in rows(agg, {}) if r["name"].startswith("turn ")]


def test_summary_metrics_and_tab_show_each_turn():
    records = conversation_records()
    agg = via_workers(records)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_020.0, users=8)
    sessions = s["sessions"]
    first = [r for r in records if r.turn == 1]
    assert sessions["started"] == len(first) and sessions["cut_at_max_model_len"] == 6
    assert list(sessions["turns"]) == ["1", "2", "3", "4+"]
    ok4 = [r for r in records if r.turn is not None and r.turn >= 4 and r.ok]
    assert sessions["turns"]["4+"]["prompt_tokens_mean"] == pytest.approx(
        sum(r.prompt_tokens for r in ok4) / len(ok4)
    )
    e2e = math.fsum(r.e2e_s for r in records if r.ok and not r.warmup)
    assert sessions["in_flight_mean"] == pytest.approx(e2e / 20.0)
    # TTFT rises with the turn in these records: the summary's medians follow
    p50 = [sessions["turns"][k]["ttft_s"]["p50"] for k in ("1", "2", "3", "4+")]
    assert p50 == sorted(p50)

    text = render(ExportState(agg, "run-1", "m")).decode()
    samples = {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for fam in text_string_to_metric_families(text)
        for x in fam.samples
    }
    lab = (("model_name", "m"), ("run_id", "run-1"))
    for key in ("1", "2", "3", "4+"):
        c = agg.turns.cells[key]
        labels = tuple(sorted((*lab, ("turn", key))))
        assert samples[("swarm_turn_requests_total", labels)] == c.requests
        assert samples[("swarm_turn_prompt_tokens_total", labels)] == c.prompt_tokens
        assert samples[("swarm_turn_ttft_seconds_count", labels)] == c.ttft.count
    assert samples[("swarm_sessions_cut_total", lab)] == 6
    assert {lbl for (name, lbls) in samples for k, lbl in lbls if k == "turn"} == {"1", "2", "3", "4+"}

    tab = {r["name"].split(",")[0]: r for r in rows(agg, {}) if r["name"].startswith("turn ")}
    assert list(tab) == ["turn 1", "turn 2", "turn 3", "turn 4+"]
    assert tab["turn 2"]["requests"] == agg.turns.cells["2"].requests
    two = [r for r in records if r.turn == 2]
    assert tab["turn 2"]["failed"] == sum(r.outcome is Outcome.TIMEOUT for r in two) > 0
    assert tab["turn 2"]["cancelled"] == sum(r.outcome is Outcome.CANCELLED for r in two) > 0


def test_an_unknown_turn_bucket_on_the_wire_is_refused():
    agg = Aggregate()
    agg.add(conversation_records(5)[1])
    wire = agg.to_wire()
    wire["turns"]["turns"]["9"] = wire["turns"]["turns"].popitem()[1]
    with pytest.raises(ValueError, match="turn bucket"):
        Aggregate.from_wire(wire)
