import random

import pyarrow.parquet as pq

from swarm.core import recordfile as recorder
from swarm.core.records import Outcome, RequestRecord
from swarm.live import recorder as live_recorder
from swarm.live.recorder import RecordWriter


def _record(i: int, rng: random.Random) -> RequestRecord:
    outcome = rng.choice(list(Outcome))
    return RequestRecord(
        workload=rng.choice(["chat", "rag"]),
        start_wall_s=1.7e9 + i,
        outcome=outcome,
        stage=i % 3,
        request_id=f"chatcmpl-{i}",
        http_status=200 if outcome is Outcome.OK else 500,
        ttft_s=rng.random(),
        ttfa_s=None,
        e2e_s=rng.random() * 5,
        tpot_s=0.02,
        itl_s=[rng.random() / 10 for _ in range(rng.randint(0, 5))],
        prompt_tokens=rng.randint(1, 3000),
        output_tokens=rng.randint(0, 500),
        reasoning_tokens=0,
        tokens_from_usage=True,
        finish_reason="length",
        error=None if outcome is Outcome.OK else "boom",
        send_lag_s=None,
        warmup=i % 7 == 0,
    )


def test_schema_lists_every_record_field_in_order():
    from dataclasses import fields

    assert recorder.SCHEMA.names == [f.name for f in fields(RequestRecord)]


def test_round_trip_over_several_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(live_recorder, "FLUSH_EVERY", 7)
    rng = random.Random(1)
    sent = [_record(i, rng) for i in range(50)]
    w = RecordWriter(tmp_path / "records", "worker-a")
    for r in sent:
        w.add(r)
    w.close()
    assert w.written == 50
    assert len(recorder.part_files(tmp_path / "records")) == 8  # 7 full parts + the rest
    back = recorder.read_records(tmp_path / "records")
    assert back == sent


def test_unflushed_records_are_the_only_loss(tmp_path, monkeypatch):
    """A worker killed before close loses its buffer only; every finished part stays readable."""
    monkeypatch.setattr(live_recorder, "FLUSH_EVERY", 10)
    rng = random.Random(2)
    w = RecordWriter(tmp_path, "w")
    for i in range(25):
        w.add(_record(i, rng))
    # no close(): simulate SIGKILL
    assert len(recorder.read_records(tmp_path)) == 20
    assert not list(tmp_path.glob("*.tmp"))


def test_merge_into_one_file(tmp_path):
    rng = random.Random(3)
    sent = [_record(i, rng) for i in range(20)]
    assert recorder.write_records(sent, tmp_path / "requests.parquet") == 20
    table = pq.read_table(tmp_path / "requests.parquet")
    assert table.num_rows == 20
    assert table.column("request_id").to_pylist() == [r.request_id for r in sent]


def test_empty_directory_reads_as_no_records(tmp_path):
    assert recorder.read_records(tmp_path) == []
    assert recorder.read_table(tmp_path).num_rows == 0


def test_background_writes_land_in_order_and_close_waits(tmp_path, monkeypatch):
    """background=True (the plugin, in a gevent process): parts are encoded and written in
    gevent's native thread pool, in order; close() returns once every part is on disk."""
    monkeypatch.setattr(live_recorder, "FLUSH_EVERY", 7)
    monkeypatch.setattr(live_recorder, "BATCH_ROWS", 3)
    rng = random.Random(4)
    sent = [_record(i, rng) for i in range(50)]
    w = RecordWriter(tmp_path, "bg", background=True)
    for r in sent:
        w.add(r)
    w.close()
    assert w.written == 50 and len(recorder.part_files(tmp_path)) == 8
    assert recorder.read_records(tmp_path) == sent
