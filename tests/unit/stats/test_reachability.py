"""swarm/stats/reachability.py: with several endpoints each one's loss is told on its own, and the
target as a whole went away only when every endpoint did."""

from __future__ import annotations

import pytest

from swarm.core.records import Outcome, RequestRecord
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.reachability import endpoints_unreachable_since, no_answer_line, target_unreachable_since

A, B = "http://10.0.0.1:8000", "http://10.0.0.2:8000"


def _agg(*runs: tuple[str, Outcome, float]) -> Aggregate:
    agg = Aggregate()
    for endpoint, outcome, t0 in runs:
        ok = outcome is Outcome.OK
        agg.add(
            RequestRecord(
                workload="w",
                start_wall_s=t0,
                outcome=outcome,
                e2e_s=1.0 if ok else 0.001,
                http_status=200 if ok else None,
                error=None if ok else "ConnectionRefusedError",
                endpoint=endpoint,
            )
        )
    return agg


def test_one_endpoint_down_is_told_apart_and_the_target_still_answers():
    agg = _agg(
        *((A, Outcome.OK, 10.0 + i) for i in range(10)),  # A answers to the end (last answer 20)
        *((B, Outcome.OK, 10.0 + i) for i in range(3)),  # B answers until 13 ...
        *((B, Outcome.CONNECT_ERROR, 15.0 + i) for i in range(4)),  # ... then refuses from 15
    )
    assert endpoints_unreachable_since(agg) == {A: None, B: pytest.approx(15.001)}  # its first refusal, ended
    assert target_unreachable_since(agg) is None  # A still answers
    s = summary.build(agg, run_id="r", start_s=0.0, end_s=30.0)
    assert s["target_unreachable_since"] is None and s["endpoints_unreachable_since"][A] is None
    assert s["endpoints_unreachable_since"][B] == summary.iso_time(15.001)
    assert s["endpoints"][B]["failures"]["connect_error"] == 4 and s["endpoints"][B]["requests"] == 7


def test_the_target_went_away_when_every_endpoint_did_at_the_latest():
    agg = _agg(
        (A, Outcome.OK, 1.0),
        (A, Outcome.CONNECT_ERROR, 5.0),
        (B, Outcome.OK, 1.0),
        (B, Outcome.CONNECT_ERROR, 8.0),
    )
    assert target_unreachable_since(agg) == pytest.approx(8.001)
    assert target_unreachable_since(Aggregate()) is None
    one = _agg(("", Outcome.OK, 1.0), ("", Outcome.CONNECT_ERROR, 5.0))  # one endpoint, as before
    assert target_unreachable_since(one) == pytest.approx(5.001)


@pytest.mark.parametrize(
    "total, said",
    [
        ({"requests": 3, "cancelled": 2, "failures": {"timeout": 1}}, "3 sent, 2 cancelled, 1 timeout ("),
        ({"requests": 2, "cancelled": 0, "failures": {"connect_error": 2}}, "2 sent, 2 connect_error ("),
        ({"requests": 3, "cancelled": 2, "failures": {}}, None),  # one completed
        ({"requests": 2, "cancelled": 1, "failures": {"http_error": 1}}, None),  # a 4xx/5xx is an answer
        ({"requests": 1, "cancelled": 0, "failures": {"truncated": 1}}, None),  # so is a cut stream
        ({"requests": 0, "cancelled": 0, "failures": {}}, None),  # nothing sent: nothing to say
    ],
)
def test_a_run_whose_every_request_went_unanswered_is_said(total, said):
    line = no_answer_line(total)
    if said is None:
        assert line is None
    else:
        assert line is not None and line.startswith("swarm: no request completed: ") and said in line
