"""summary.json: the keys the issue names, exactly, with numbers matching the records they came from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from swarm.core.records import OUTCOMES, Outcome, RequestRecord
from swarm.stats import slo, summary
from swarm.stats.aggregate import Aggregate
from tests.helpers.synthetic import exact_values, synthetic_records

BLOCK = {
    "requests",
    "completed",
    "cancelled",
    "cancelled_by_client",
    "failures",
    "prompt_tokens",
    "output_tokens",
    "reasoning_tokens",
    "prompt_cache",
    "qps",
    "output_tok_s",
    "ttft_s",
    "ttfa_s",
    "itl_s",
    "tpot_s",
    "e2e_s",
    "send_lag_s",
    "ttftc_s",
    "task_s",
}
STATS = {"p50", "p90", "p95", "p99", "mean", "max"}


def _agg(records):
    agg = Aggregate()
    for r in records:
        agg.add(r)
    return agg


def test_keys_exactly_as_specified(tmp_path):
    records = synthetic_records(500, workloads=("short_qa", "chat"), stages=(0, 1, 2))
    s = summary.build(
        _agg(records),
        run_id="r1",
        model_name="m",
        start_s=1_700_000_000.0,
        end_s=1_700_000_010.0,
        users=8,
        workers=2,
        degraded_workers=[{"worker": "w1", "detected_at": "t", "reason": "x"}],
    )
    assert s["workloads"] == ["chat", "short_qa"]
    for name in ("total", "chat", "short_qa"):
        assert set(s[name]) == BLOCK | {"ci"}  # no `goodput` without --goodput
        ci = s[name]["ci"]
        assert set(ci) == {"level", "reasons", *summary.CI_KEYS}
        assert set(ci["reasons"]) == {k for k in summary.CI_KEYS if ci[k] is None}  # each null says why
        assert set(s[name]["failures"]) == {o.value for o in OUTCOMES if o.failed}
        for lat in ("ttft_s", "ttfa_s", "itl_s", "tpot_s", "e2e_s"):
            assert set(s[name][lat]) == STATS
    for key in (
        "run_id",
        "model_name",
        "start_time",
        "end_time",
        "duration_s",
        "users",
        "workers",
        "degraded",
        "degraded_workers",
        "drain",
        "stages",
    ):
        assert key in s
    assert s["degraded"] is True and s["degraded_workers"][0]["worker"] == "w1"
    assert s["start_time"] == "2023-11-14T22:13:20.000+00:00" and s["duration_s"] == 10.0
    assert [st["stage"] for st in s["stages"]] == [0, 1, 2]
    for st in s["stages"]:
        assert set(st["total"]) == BLOCK | {"ci"} and st["duration_s"] > 0
    assert sum(st["total"]["requests"] for st in s["stages"]) == s["total"]["requests"] == 500
    summary.write(s, tmp_path / "out" / "summary.json")
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == s


def test_numbers_match_the_records():
    records = synthetic_records(2000, seed=3, workloads=("rag",), stages=(0,))
    s = summary.build(_agg(records), run_id="r", start_s=100.0, end_s=150.0)
    t = s["total"]
    assert t == s["rag"]
    assert t["requests"] == len(records)
    assert sum(t["failures"].values()) == sum(r.outcome is not Outcome.OK for r in records)
    assert t["output_tokens"] == sum(r.output_tokens for r in records)
    assert t["qps"] == pytest.approx(len(records) / 50.0)
    assert t["output_tok_s"] == pytest.approx(t["output_tokens"] / 50.0)
    for lat in ("ttft", "ttfa", "itl", "tpot", "e2e"):
        exact = np.asarray(exact_values(records, lat))
        got = t[f"{lat}_s"]
        assert got["max"] == exact.max()
        assert got["mean"] == pytest.approx(exact.mean(), rel=1e-9)
        for k, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            want = float(np.percentile(exact, q, method="lower"))
            assert abs(got[k] - want) <= 0.01 * want


def test_empty_latency_is_null_and_duration_falls_back_to_the_data_window():
    agg = _agg(
        [
            RequestRecord("a", 10.0, outcome=Outcome.CONNECT_ERROR, e2e_s=0.5),
            RequestRecord("a", 12.0, outcome=Outcome.HTTP_ERROR, e2e_s=2.0),
        ]
    )
    s = summary.build(agg, run_id="r")
    assert s["duration_s"] == 4.0 and s["total"]["qps"] == 0.5
    assert s["total"]["ttft_s"] == dict.fromkeys(STATS)
    json.dumps(s, allow_nan=False)
    verdicts = slo.evaluate(slo.parse("error_rate<=1%,ttft_p99<=1s"), s)
    assert [v.ok for v in verdicts] == [False, False]
    assert "measured 100.00%" in verdicts[0].describe() and "no data" in verdicts[1].describe()


def test_slo_reads_per_workload_blocks():
    records = synthetic_records(300, workloads=("short_qa", "chat"), stages=(0,))
    s = summary.build(_agg(records), run_id="r", start_s=0.0, end_s=10.0)
    (v,) = slo.evaluate(slo.parse("chat.ttft_p50<=100s"), s)
    assert v.ok and v.value == s["chat"]["ttft_s"]["p50"]


def agent_records() -> list[RequestRecord]:
    """Three tasks: one of 2 steps, one ended by an invalid call, one without a call under required."""
    out = []
    for task, steps in (
        ("a", [(1, 1, None, None), (0, 0, None, 2.0)]),
        ("b", [(1, 0, "missing_required", 5.0)]),
    ):
        for i, (calls, valid, error, task_s) in enumerate(steps, 1):
            out.append(
                RequestRecord(
                    "agent", 0.0, e2e_s=0.5, ttft_s=0.1, task_id=task, step=i, tool_calls=calls,
                    tool_calls_valid=valid, tool_error=error, ttftc_s=0.1 if calls else None, tool_s=0.0, task_s=task_s,
                )
            )  # fmt: skip
    out.append(
        RequestRecord("agent", 0.0, e2e_s=0.5, task_id="c", step=1, tool_calls=0, tool_calls_valid=0,
                      tool_error="none_when_required", tool_s=0.0, task_s=0.5)
    )  # fmt: skip
    return out


def test_agent_tools_block_and_task_goodput_exactly():
    agg = Aggregate()
    for r in agent_records():
        agg.add(r)
    s = summary.build(agg, run_id="r", start_s=0.0, end_s=10.0, task_slo_s=3.0)
    tools = s["total"]["tools"]
    assert tools == {
        "steps": 4,
        "tasks": 3,
        "calls": 2,
        "valid": 1,
        "invalid": 1,
        "none_when_required": 1,
        "reasons": {"missing_required": 1, "none_when_required": 1},
        "task_goodput": {"bound_s": 3.0, "met": 2, "tasks": 3, "share": 2 / 3},
    }
    assert s["agent"]["tools"] == tools
    assert s["total"]["task_s"]["max"] == 5.0 and s["total"]["ttftc_s"]["max"] == 0.1
    assert "tools" not in summary.build(Aggregate(), run_id="r")["total"]
