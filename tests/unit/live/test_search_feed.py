"""The search's live QPS reads the workers' real reports: a report's finished requests, in the
wire format the workers send (a format change that the feed does not follow once left every live
QPS empty, and the knee search doubled to 4,096 users)."""

from __future__ import annotations

from types import SimpleNamespace

import msgpack
from locust.event import Events

from swarm.core.records import Outcome, RequestRecord
from swarm.live.search import CompletionFeed
from swarm.stats.aggregate import DRAIN, Aggregate
from swarm.stats.wire import WIRE_KEY

T0 = 1_700_000_000.0


def report(n: int, stage: int = 0) -> dict:
    agg = Aggregate()
    for i in range(n):
        r = RequestRecord(
            workload="short_qa", start_wall_s=T0 + i, outcome=Outcome.OK, stage=stage, ttft_s=0.1, e2e_s=1.0
        )
        agg.add(r, DRAIN if i % 5 == 0 else stage)  # every completion window counts
    return msgpack.unpackb(msgpack.packb({WIRE_KEY: agg.to_wire()}))


def test_a_workers_report_feeds_its_finished_requests():
    env = SimpleNamespace(events=Events(), runner=None)
    feed = CompletionFeed(env)
    env.events.worker_report.fire(client_id="w1", data=report(12))
    env.events.worker_report.fire(client_id="w1", data=report(30, stage=1))
    env.events.worker_report.fire(client_id="w2", data={"stats": []})  # a report with no swarm part
    series = feed.done.reports["w1"]
    assert [n for _t, n in series] == [12, 42]
    assert "w2" not in feed.done.reports


def test_finished_in_counts_every_cell_and_window():
    agg = Aggregate()
    for i, workload in enumerate(["a", "b", "a", "c"] * 3):
        agg.add(RequestRecord(workload=workload, start_wall_s=T0, outcome=Outcome.OK, stage=i % 2), i % 3)
    assert Aggregate.finished_in(agg.to_wire()) == 12 == agg.combined().requests
