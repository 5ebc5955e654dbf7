"""swarm.orchestrate.progress: the live line's numbers come from two scrapes of the master's /metrics."""

from __future__ import annotations

import math

from swarm.core.records import Outcome, RequestRecord
from swarm.live.exporter import ExportState, render
from swarm.orchestrate.progress import MasterSample, parse_master_metrics, window_line
from swarm.stats.aggregate import Aggregate
from swarm.stats.quantiles import quantile_bucket
from swarm.stats.sketch import BUCKETS

INF = math.inf


def test_the_p99_is_shown_as_the_bucket_that_holds_it():
    bounds = [0.06, 0.08, 0.1, 0.25, INF]
    # 100 observations, all between 80 and 100 ms: interpolation would say 99.8 ms; the bucket says 80-100
    assert quantile_bucket(0.99, bounds, [0, 0, 100, 100, 100]) == (0.08, 0.1)
    assert quantile_bucket(0.99, bounds, [0, 98, 98, 98, 100]) == (0.25, INF)  # 2% above every bound
    assert quantile_bucket(0.5, bounds, [60, 60, 60, 60, 60]) == (0.0, 0.06)
    assert quantile_bucket(0.99, bounds, [0, 0, 0, 0, 0]) is None


def sample(requests: float, failed: float, ttft_cum: dict[float, float], users: float = 8) -> MasterSample:
    return MasterSample(requests=requests, failed=failed, users=users, ttft_buckets=ttft_cum)


def test_window_line_is_over_the_interval_only():
    bounds = [0.08, 0.1, 1.0, INF]
    prev = sample(100, 1, dict(zip(bounds, [90, 95, 100, 100], strict=True)))  # earlier: fast
    cur = sample(160, 3, dict(zip(bounds, [90, 95, 160, 160], strict=True)))  # this window: 100 ms-1 s
    line = window_line(prev, cur, dt=6.0, elapsed_s=12, total_s=60, stages=1)
    assert line == "[8 users]   12s/60s | QPS  10.00 | TTFT p99 100ms-1s | requests 160 | errors 3"
    idle = window_line(cur, cur, dt=6.0, elapsed_s=18, total_s=60, stages=3)
    assert idle.startswith("[stage 1/3 8 users]") and "TTFT p99 - |" in idle and "QPS   0.00" in idle


def test_the_line_reads_what_the_master_exports():
    agg = Aggregate()
    for i in range(102):
        ttft = 0.085 if i < 99 else 1.7
        outcome = Outcome.TIMEOUT if i >= 100 else Outcome.OK
        agg.add(
            RequestRecord(
                workload="short_qa",
                start_wall_s=1.7e9 + i,
                outcome=outcome,
                ttft_s=ttft,
                e2e_s=ttft + 0.5,
                output_tokens=10,
            )
        )
    cur = parse_master_metrics(render(ExportState(aggregate=agg, run_id="r1", users=8)).decode())
    assert cur.requests == 102 and cur.failed == 2 and cur.users == 8
    assert set(cur.ttft_buckets) == {*BUCKETS, INF}
    line = window_line(MasterSample(), cur, dt=10.0, elapsed_s=10, total_s=10, stages=1)
    # 99 of the 100 successful TTFTs at 85 ms: the p99 is in the 80-100 ms bucket
    assert line == "[8 users]   10s/10s | QPS  10.20 | TTFT p99 80-100ms | requests 102 | errors 2"


def test_a_replay_that_falls_behind_says_so_in_the_line():
    text = render(ExportState(aggregate=Aggregate(), run_id="r1", users=4, replay_late_rows=7)).decode()
    assert "swarm_trace_replay_late_rows" in text
    cur = parse_master_metrics(text)
    assert cur.replay_late == 7
    assert window_line(MasterSample(), cur, 6.0, 6, 60, 1).endswith(" | replay behind: 7 rows late")
    plain = parse_master_metrics(render(ExportState(aggregate=Aggregate(), run_id="r1")).decode())
    assert (
        plain.replay_late == 0
        and "swarm_trace_replay_late_rows"
        not in render(ExportState(aggregate=Aggregate(), run_id="r1")).decode()
    )
