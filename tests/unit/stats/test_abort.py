"""--abort-on (swarm/stats/abort.py): the conditions' grammar and the sliding window the master judges."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.core.records import Outcome, RequestRecord
from swarm.stats import abort
from swarm.stats.aggregate import Aggregate, ReportRead


def delta(
    ok: int = 0, failed: int = 0, cancelled: int = 0, ttft_s: float = 0.1, workload: str = "a"
) -> ReportRead:
    """A worker's report of these requests, as the master reads it."""
    agg = Aggregate()
    for _ in range(ok):
        agg.add(RequestRecord(workload, 100.0, ttft_s=ttft_s, e2e_s=1.0, output_tokens=3))
    for _ in range(failed):
        agg.add(
            RequestRecord(
                workload, 100.0, outcome=Outcome.HTTP_ERROR, http_status=401, error="401 Unauthorized"
            )
        )
    for _ in range(cancelled):
        agg.add(RequestRecord(workload, 100.0, outcome=Outcome.CANCELLED))
    return Aggregate.read_wire(agg.to_wire())


def test_conditions_parse_with_the_slo_grammar_and_a_window():
    (c,) = abort.parse("error_rate>50%/10s")
    assert (c.objective.metric, c.objective.op, c.objective.threshold, c.window_s) == (
        "error_rate",
        ">",
        0.5,
        10.0,
    )
    a, b = abort.parse("ttft_p99>2s/1m, short_qa.error_rate>=90%")
    assert (a.objective.metric, a.objective.threshold, a.window_s) == ("ttft_p99", 2.0, 60.0)
    assert (b.objective.workload, b.window_s) == ("short_qa", abort.DEFAULT_WINDOW_S)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty --abort-on"),
        (" , ", "empty --abort-on"),
        ("error_rate>50%/1s", "at least 3 s"),
        ("error_rate>50%/soon", "not a duration"),
        ("error_rate>50%/inf", "not a duration"),
        ("foo>1/10s", "unknown metric 'foo'"),
        ("error_rate>50ms/10s", "does not fit error_rate"),
        ("/10s", "expected METRIC OP VALUE"),
    ],
)
def test_a_bad_condition_is_one_usage_error_naming_it(text, says):
    with pytest.raises(UsageError, match="--abort-on") as e:
        abort.parse(text)
    assert says in str(e.value)


def test_the_breaker_trips_on_the_window_only_once_the_run_is_that_long():
    breaker = abort.Breaker(abort.parse("error_rate>50%/10s"))
    breaker.add(1000.0, delta(failed=20))
    assert breaker.check(1005.0, started_s=998.0) is None  # the run is 7 s old: no 10 s window yet
    trip = breaker.check(1008.5, started_s=998.0)
    assert trip is not None and trip.value == 1.0 and (trip.failed, trip.requests) == (20, 20)
    assert trip.reason == (
        "aborted: error_rate 100% > 50% over the last 10 s "
        "(20 of 20 requests failed: http_error: 401 Unauthorized)"
    )
    entry = trip.entry("2026-01-01T00:00:00.000+00:00")
    assert entry["condition"] == "error_rate>50%/10s" and entry["window_s"] == 10.0 and entry["value"] == 1.0


def test_old_failures_slide_out_of_the_window():
    breaker = abort.Breaker(abort.parse("error_rate>50%/10s"))
    breaker.add(1000.0, delta(failed=30))  # a bad start ...
    breaker.add(1009.0, delta(ok=10))
    assert breaker.check(1009.5, 990.0) is not None  # 30 failed of 40 in the last 10 s
    breaker.add(1012.0, delta(ok=10, failed=2))
    assert breaker.check(1012.5, 990.0) is None  # ... gone: 2 failed of 22


def test_an_error_rate_needs_enough_requests_and_cancelled_ones_are_not_failures():
    breaker = abort.Breaker(abort.parse("error_rate>=50%/5s"))
    breaker.add(1000.0, delta(failed=abort.MIN_REQUESTS - 1, cancelled=50))
    assert breaker.check(1001.0, 900.0) is None  # 4 of 4 failed: too few to be a rate
    breaker.add(1001.0, delta(ok=1))
    trip = breaker.check(1002.0, 900.0)
    assert trip is not None and trip.value == pytest.approx(0.8)


def test_latency_and_workload_conditions():
    breaker = abort.Breaker(abort.parse("b.ttft_p99>1s/5s"))
    breaker.add(1000.0, delta(ok=20, ttft_s=3.0, workload="a"))  # another workload's slowness
    breaker.add(1000.0, delta(ok=20, ttft_s=0.2, workload="b"))
    assert breaker.check(1001.0, 900.0) is None
    breaker.add(1002.0, delta(ok=20, ttft_s=4.0, workload="b"))
    trip = breaker.check(1002.5, 900.0)
    assert trip is not None and trip.value == pytest.approx(4.0, rel=0.02)  # (the sketch's bins: 1%)
    assert trip.reason.startswith("aborted: b.ttft_p99 ")
    assert trip.reason.endswith("> 1.000s over the last 5 s (40 requests)")


def test_the_reason_never_carries_a_targets_control_characters():
    agg = Aggregate()
    for _ in range(10):
        agg.add(
            RequestRecord(
                "a", 100.0, outcome=Outcome.HTTP_ERROR, http_status=500, error="500 \x1b]0;pwned\x07"
            )
        )
    breaker = abort.Breaker(abort.parse("error_rate>50%/5s"))
    breaker.add(1000.0, Aggregate.read_wire(agg.to_wire()))
    trip = breaker.check(1001.0, 900.0)
    assert trip is not None and "\x1b" not in trip.reason and trip.reason.endswith("500 \\x1b]0;pwned\\x07)")
