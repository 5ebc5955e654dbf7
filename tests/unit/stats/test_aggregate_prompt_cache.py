"""Cached prompt tokens per (workload, stage): summed over the requests that reported them, merged
exactly over the wire, and absent (not zero) in summary.json when no request reported them."""

from __future__ import annotations

import msgpack
import pytest

from swarm.core.records import Outcome, RequestRecord
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate

T0 = 1_700_000_000.0


def rec(
    workload: str, stage: int, prompt: int | None, cached: int | None, outcome=Outcome.OK
) -> RequestRecord:
    return RequestRecord(
        workload=workload,
        start_wall_s=T0 + stage,
        stage=stage,
        outcome=outcome,
        ttft_s=0.1,
        e2e_s=0.5,
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=4,
    )


RECORDS = [
    rec("rag", 0, 1000, 0),  # the first: nothing cached yet
    rec("rag", 0, 1000, 496),
    rec("rag", 1, 1000, 496),
    rec("rag", 1, 900, 496),
    rec("short_qa", 0, 40, None),  # a server that did not say
    rec("short_qa", 1, 40, None),
    rec("chat", 1, 200, 0),  # said: nothing cached (zero, not absent)
    rec("chat", 1, None, None, Outcome.CONNECT_ERROR),
]


def test_sums_only_over_the_requests_that_reported():
    agg = Aggregate()
    for r in RECORDS:
        agg.add(r)
    rag = agg.combined(workload="rag")
    assert rag.cached == [4, 1488, 3900]
    assert agg.combined(workload="short_qa").cached == [0, 0, 0]
    assert agg.combined(workload="chat").cached == [1, 0, 200]
    assert agg.combined(stage=1).cached == [3, 992, 2100]
    assert agg.combined().prompt_tokens == 4180  # every prompt token, reported or not


def test_merged_over_the_wire_exactly():
    one, workers = Aggregate(), [Aggregate(), Aggregate(), Aggregate()]
    for i, r in enumerate(RECORDS * 5):
        one.add(r)
        workers[i % 3].add(r)
    master = Aggregate()
    for w in workers:
        master.merge(Aggregate.from_wire(msgpack.unpackb(msgpack.packb(w.to_wire()))))
    for key in one.cells:
        assert master.cells[key].cached == one.cells[key].cached


def test_summary_blocks_per_workload_and_stage():
    agg = Aggregate()
    for r in RECORDS:
        agg.add(r)
    s = summary.build(agg, run_id="r", start_s=T0, end_s=T0 + 2)
    assert s["rag"]["prompt_cache"] == {
        "requests": 4,
        "cached_tokens": 1488,
        "prompt_tokens": 3900,
        "hit_share": pytest.approx(1488 / 3900),
    }
    assert s["short_qa"]["prompt_cache"] is None  # absent: the server never said
    assert s["chat"]["prompt_cache"]["hit_share"] == 0.0  # said: nothing cached
    assert s["total"]["prompt_cache"]["requests"] == 5
    stage1 = s["stages"][1]
    assert stage1["rag"]["prompt_cache"]["hit_share"] == pytest.approx(992 / 1900)
    assert stage1["short_qa"]["prompt_cache"] is None
    assert stage1["total"]["prompt_cache"]["cached_tokens"] == 992
