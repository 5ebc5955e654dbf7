"""The LLM tab's rows (swarm.live.webui), in-process; the tab in real headless Chromium:
tests/e2e/test_webui.py."""

from __future__ import annotations

import pytest

from swarm.core.records import Outcome, RequestRecord
from swarm.live.webui import row, rows
from swarm.stats.aggregate import Aggregate


def test_rows_have_every_workload_and_a_total():
    agg = Aggregate()
    agg.add(RequestRecord("chat", 1.0, ttft_s=0.25, e2e_s=1.0, itl_s=[0.02, 0.03], output_tokens=3))
    agg.add(RequestRecord("rag", 1.0, outcome=Outcome.TIMEOUT, e2e_s=30.0))
    got = rows(agg, {"chat": (2.0, 30.0), "total": (3.0, 30.0)})
    assert [r["name"] for r in got] == ["chat", "rag", "Total"]
    chat, rag, total = got
    assert chat["ttft_p50_ms"] == 250.0 and chat["qps"] == 2.0 and chat["errors"] == "-"
    assert rag["ttft_p50_ms"] == "-" and rag["errors"] == "timeout=1" and rag["qps"] == 0.0
    assert total["requests"] == 2 and total["failed"] == 1


def test_agent_steps_fill_the_tool_call_and_task_columns():
    agg = Aggregate()
    agg.add(RequestRecord("agent", 0.0, e2e_s=0.2, task_id="t", step=1, tool_calls=2, tool_calls_valid=1,
                          tool_error="bad_json", ttftc_s=0.05, tool_s=0.0, task_s=0.2))  # fmt: skip
    r = row("agent", agg.combined(), (1.0, 10.0))
    assert r["tool_calls"] == "1 tasks, 1 valid, 1 invalid (bad_json=1)"
    assert r["ttftc_p50_ms"] == pytest.approx(50, rel=0.01) and r["task_p90_ms"] == pytest.approx(
        200, rel=0.01
    )
    assert row("chat", Aggregate().combined(), (0.0, 0.0))["tool_calls"] == "-"
