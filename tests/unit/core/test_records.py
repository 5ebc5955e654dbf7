"""swarm/core/records.py: outcomes (cancelled is neither ok nor failed), the record's dict form,
and the bounded turn labels."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from swarm.core.records import FAILURES, LATENCIES, OUTCOMES, Outcome, RequestRecord, turn_bucket


def test_every_outcome_is_ok_failed_or_cancelled_exactly_once():
    cut = {Outcome.CANCELLED, Outcome.CANCELLED_BY_CLIENT}  # by the stop, by the client (--cancel)
    assert Outcome.OK not in FAILURES and not cut & set(FAILURES)
    assert set(FAILURES) | {Outcome.OK} | cut == set(OUTCOMES)
    assert all(o.failed for o in FAILURES) and not any(o.failed for o in cut)
    assert Outcome.CANCELLED_BY_CLIENT.value == "cancelled_by_client" != Outcome.CANCELLED.value
    assert RequestRecord("w", 0.0).ok and not RequestRecord("w", 0.0, Outcome.CANCELLED).ok


def test_each_latency_name_is_a_seconds_field_of_the_record():
    fields = {f.name for f in dataclasses.fields(RequestRecord)}
    assert {f"{name}_s" for name in LATENCIES} <= fields


def test_the_dict_form_has_the_outcome_as_text_and_survives_json():
    r = RequestRecord("chat", 1700000000.5, Outcome.TRUNCATED, itl_s=[0.01, 0.02], turn=2)
    d = r.to_dict()
    assert d["outcome"] == "truncated" and type(d["outcome"]) is str
    assert orjson.loads(orjson.dumps(d)) == d
    assert RequestRecord(**{**d, "outcome": Outcome(d["outcome"])}) == r


@pytest.mark.parametrize(("turn", "label"), [(1, "1"), (2, "2"), (3, "3"), (4, "4+"), (40, "4+")])
def test_turns_fall_in_four_bounded_labels(turn, label):
    assert turn_bucket(turn) == label


def test_a_record_carries_its_endpoint_to_dict_and_the_record_file(tmp_path):
    from swarm.core.recordfile import read_records, write_records

    r = RequestRecord(workload="w", start_wall_s=1.0, endpoint="http://10.0.0.2:8000")
    assert r.to_dict()["endpoint"] == "http://10.0.0.2:8000"
    assert RequestRecord(workload="w", start_wall_s=1.0).endpoint == ""
    write_records([r], tmp_path / "part-0.parquet")
    assert [x.endpoint for x in read_records(tmp_path)] == ["http://10.0.0.2:8000"]
