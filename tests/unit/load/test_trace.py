"""Trace files (swarm/load/trace.py) and the prompts of their rows (swarm/load/trace_prompts.py)."""

from __future__ import annotations

import importlib.util
import json
import math

import pytest

from swarm.core.errors import UsageError
from swarm.core.tokenizer import PseudoTokenizer
from swarm.load.trace import TraceRow, implied_hit_rate, load_trace
from swarm.load.trace_prompts import TracePrompts
from swarm.stats.trace_replay import replay_lines
from tests.helpers.support import REPO

TRACES = REPO / "swarm" / "load" / "traces"
SAMPLES = {
    "mooncake": "mooncake_sample.jsonl",
    "azure": "azure_sample.csv",
    "burstgpt": "burstgpt_sample.csv",
    "jsonl": "jsonl_sample.jsonl",
}


def _script():
    spec = importlib.util.spec_from_file_location(
        "make_sample_traces", REPO / "scripts" / "make_sample_traces.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_script_writes_the_shipped_samples_byte_for_byte():
    for name, make in _script().SAMPLES.items():
        assert (TRACES / name).read_text(encoding="utf-8") == make(), name


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_every_sample_parses_each_row_once_in_time_order(fmt):
    path = TRACES / SAMPLES[fmt]
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    n = len(lines) - (1 if path.suffix == ".csv" else 0)
    t = load_trace(path, fmt)
    assert len(t.rows) == t.rows_in_file == n
    assert sorted(r.row for r in t.rows) == list(range(n))
    assert [r.at_s for r in t.rows] == sorted(r.at_s for r in t.rows) and t.rows[0].at_s == 0.0
    assert all(r.input_tokens >= 1 and r.output_tokens >= 0 for r in t.rows)


def test_mooncake_times_are_milliseconds_and_hash_ids_kept():
    path = TRACES / SAMPLES["mooncake"]
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    t = load_trace(path, "mooncake")
    by_row = {r.row: r for r in t.rows}
    for i in (0, 1, 599):
        assert by_row[i].at_s == pytest.approx((raw[i]["timestamp"] - raw[0]["timestamp"]) / 1000)
        assert by_row[i].hash_ids == tuple(raw[i]["hash_ids"])
        assert by_row[i].input_tokens == raw[i]["input_length"]
    assert 11 < t.span_s < 13  # 600 rows at 50 req/s


def test_azure_seven_digit_fractions_and_time_scale(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:48.1805901,10,2\n"
    )
    assert [r.at_s for r in load_trace(p, "azure").rows] == pytest.approx([0.0, 1.5000001])
    assert [r.at_s for r in load_trace(p, "azure", time_scale=2).rows] == pytest.approx([0.0, 0.75])


def test_window_keeps_file_row_ids_and_starts_at_zero():
    path = TRACES / SAMPLES["burstgpt"]
    full = load_trace(path, "burstgpt")
    w = load_trace(path, "burstgpt", start_s=2.0, duration_s=3.0)
    expect = [r for r in full.rows if 2.0 <= r.at_s < 5.0]
    assert [r.row for r in w.rows] == [r.row for r in expect]
    assert [r.at_s for r in w.rows] == pytest.approx([r.at_s - 2.0 for r in expect])
    with pytest.raises(UsageError, match="no row in the window"):
        load_trace(path, "burstgpt", start_s=1e6)


@pytest.mark.parametrize(
    "fmt, text, why",
    [
        ("mooncake", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1\n', "line 2: not JSON"),
        ("mooncake", '{"timestamp": 0, "input_length": 5}\n', "line 1: no output_length"),
        ("mooncake", '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n',
         "line 1: 1 hash_ids for 600 tokens: 2 blocks of 512"),
        ("mooncake", '\n{"timestamp": -5, "input_length": 5, "output_length": 1}\n', "line 2: timestamp must be"),
        ("jsonl", '{"start_wall_s": 1, "prompt_tokens": 2.5, "output_tokens": 1}\n', "line 1: prompt_tokens must be"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3,4\nyesterday,3,4\n",
         "line 3: TIMESTAMP is not a date"),
        ("azure", "TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:15:46.1,3,4\n", "line 1: no column ContextTokens"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,GPT-4,3\n",
         "line 2: 6 columns expected"),
    ],
)  # fmt: skip
def test_bad_rows_are_named_by_line(tmp_path, fmt, text, why):
    p = tmp_path / "t.txt"
    p.write_text(text)
    with pytest.raises(UsageError, match=why):
        load_trace(p, fmt)


def test_bad_options():
    with pytest.raises(UsageError, match="--trace-format"):
        load_trace(TRACES / SAMPLES["jsonl"], "sharegpt")
    with pytest.raises(UsageError, match="--time-scale"):
        load_trace(TRACES / SAMPLES["jsonl"], "jsonl", time_scale=0)
    with pytest.raises(UsageError, match="no such file"):
        load_trace(TRACES / "nope.jsonl", "jsonl")
    for bad in (0, -1):  # the one check of --trace-block-size (swarm run's plan and the master load here)
        with pytest.raises(UsageError, match=rf"^--trace-block-size must be at least 1 token \(got {bad}\)$"):
            load_trace(TRACES / SAMPLES["jsonl"], "jsonl", block_size=bad)


def test_implied_hit_rate_counts_leading_blocks_seen_before():
    rows = [
        TraceRow(0, 0.0, 1000, 1, (1, 2)),  # nothing cached yet
        TraceRow(1, 0.1, 1100, 1, (1, 2, 3)),  # block 1 (512) and block 2 (488 of 512 seen): 1000
        TraceRow(2, 0.2, 700, 1, (9, 2)),  # first block new: the chain breaks, block 2 does not count
        TraceRow(3, 0.3, 300, 1, ()),  # no hash ids: nothing
    ]
    assert implied_hit_rate(rows, 512) == pytest.approx(1000 / (1000 + 1100 + 700 + 300))
    assert implied_hit_rate([TraceRow(0, 0.0, 10, 1)], 512) is None


def _prompts(block=16) -> TracePrompts:
    p = TracePrompts(block, seed=5)
    p.prepare(PseudoTokenizer(), progress=lambda _: None)
    return p


def _count(text: str) -> int:
    return PseudoTokenizer().count_chat([{"role": "user", "content": text}])


def test_prompts_have_the_rows_exact_lengths():
    p = _prompts()
    for n in (p.fit.overhead + 1, 40, 97, 512, 1000):
        rows = (TraceRow(1, 0.0, n, 1, tuple(range(math.ceil(n / 16)))), TraceRow(2, 0.0, n, 1))
        for row in rows:
            assert _count(p.text(row)) == n


def test_rows_sharing_hash_ids_share_exactly_those_blocks():
    p = _prompts(block=16)
    a = p.text(TraceRow(1, 0.0, 200, 1, tuple(range(13))))
    b = p.text(TraceRow(2, 0.0, 150, 1, (0, 1, 2, 50, 51, 52, 53, 54, 55, 56)))
    c = p.text(TraceRow(3, 0.0, 200, 1))  # no hash ids: blocks of its own
    d = p.text(TraceRow(4, 0.0, 200, 1))
    words_a, words_b = a.split(" "), b.split(" ")
    common = next(i for i, (x, y) in enumerate(zip(words_a, words_b, strict=False)) if x != y)
    assert common == 1 + 3 * 16  # the anchor, then exactly the 3 shared blocks of 16 words
    assert c.split(" ")[1] != d.split(" ")[1] or c.split(" ")[2] != d.split(" ")[2]
    assert p.text(TraceRow(7, 0.0, 200, 1, tuple(range(13)))) == a  # same ids, same lengths: same prompt
    again = _prompts(block=16)  # another worker, same seed: the same blocks
    assert again.text(TraceRow(2, 0.0, 150, 1, (0, 1, 2, 50, 51, 52, 53, 54, 55, 56))) == b


def test_replay_lines_name_lost_and_late_workers():
    s = {
        "sent": 600, "rows": 600, "unsent": 0, "duplicates": 0, "reassigned": 41,
        "reassigned_from": {"w2": 41}, "reassigned_max_lag_s": 3.2, "max_lag_bound_s": 1.0,
        "behind": [{"worker": "w1", "late": 3, "sent": 300, "max_lag_s": 1.5}],
    }  # fmt: skip
    lines = replay_lines({"trace_replay": s, "total": {"send_lag_s": {"p50": 0.0012, "p99": 0.0083}}})
    assert lines[0].startswith(
        "swarm: trace replay: 600 of 600 rows sent (0 unsent, 0 twice), send lag p50 1ms p99 8ms, 41 re-assigned"
    )
    assert replay_lines({"total": {}}) == []
    assert "w2: 41" in lines[0] and "3.200 s late" in lines[0]
    assert (
        lines[1]
        == "swarm: trace replay fell behind: worker w1 sent 3 of 300 rows more than 1 s late (max 1.500 s)"
    )
