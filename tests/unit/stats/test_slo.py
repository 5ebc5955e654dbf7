import pytest

from swarm.core.errors import UsageError
from swarm.stats import slo
from swarm.stats.slo import task_bound

SUMMARY = {
    "total": {
        "requests": 200,
        "failures": {"ok": 0, "timeout": 1, "http_error": 1},
        "qps": 12.5,
        "output_tok_s": 800.0,
        "ttft_s": {"p50": 0.1, "p90": 0.3, "p95": 0.4, "p99": 0.79, "mean": 0.15, "max": 1.2},
        "e2e_s": {"p50": 2.0, "p90": 3.0, "p95": 4.0, "p99": 5.2, "mean": 2.1, "max": 6.0},
    },
    "chat": {
        "requests": 100,
        "failures": {},
        "qps": 6.0,
        "output_tok_s": 400.0,
        "tpot_s": {"p50": 0.035, "p90": 0.04, "p95": 0.041, "p99": 0.05, "mean": 0.036, "max": 0.06},
    },
}


def test_parse_units_and_defaults():
    objs = slo.parse("ttft_p99<=800ms, e2e_p99<5s,error_rate<=1%,chat.tpot_p50<=40ms,qps>=10")
    assert [(o.workload, o.metric, o.op) for o in objs] == [
        ("total", "ttft_p99", "<="),
        ("total", "e2e_p99", "<"),
        ("total", "error_rate", "<="),
        ("chat", "tpot_p50", "<="),
        ("total", "qps", ">="),
    ]
    assert [o.threshold for o in objs] == pytest.approx([0.8, 5.0, 0.01, 0.04, 10.0])


def test_evaluate_pass_and_fail_with_measured_values():
    verdicts = slo.evaluate(
        slo.parse("ttft_p99<=800ms,e2e_p99<=5s,error_rate<=1%,chat.tpot_p50<=40ms"), SUMMARY
    )
    assert [v.ok for v in verdicts] == [True, False, True, True]
    assert verdicts[1].value == pytest.approx(5.2)
    assert verdicts[1].describe() == "SLO FAIL: total.e2e_p99 <= 5.000s (measured 5.200s)"
    assert verdicts[2].value == pytest.approx(0.01)  # 2 failed of 200; "ok" key never counts as failed
    assert verdicts[0].describe() == "SLO PASS: total.ttft_p99 <= 800.0ms (measured 790.0ms)"


def test_missing_data_fails_rather_than_passing():
    (v,) = slo.evaluate(slo.parse("ttfa_p99<=1s"), SUMMARY)
    assert v.value is None and not v.ok
    assert "no data" in v.describe()


@pytest.mark.parametrize(
    "bad, words",
    [
        ("ttft_p99<=", "expected [WORKLOAD.]METRIC OP VALUE"),
        ("ttft_p42<=1s", "unknown metric 'ttft_p42'"),
        ("latency<=1s", "unknown metric 'latency'"),
        ("ttft_p99<=5%", "unit '%' does not fit ttft_p99"),
        ("qps>=5ms", "unit 'ms' does not fit qps"),
        ("ttft_p99=>1s", "expected"),
        ("", "empty --slo"),
        ("nosuch.ttft_p99<=1s", "no workload 'nosuch'"),
        # a percentile with decimals: not read as workload `ttft_p99` and metric `9999`
        ("ttft_p99.9999<=1s", "percentile p99.9999 is not kept (summary.json keeps p50, p90, p95, p99"),
        ("chat.e2e_p99.9<=1s", "percentile p99.9 is not kept"),
    ],
)
def test_malformed_slos_say_what_is_wrong(bad, words):
    with pytest.raises(UsageError, match=None) as e:
        slo.parse(bad, workloads={"chat", "rag"})
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_objectives_parsed_before_the_runs_workloads_are_known_are_checked_against_them():
    """`check_workloads` (swarm/live/user.py, once the mix is known) says what `parse` with the
    workloads would: the first objective of a workload the run does not have."""
    text = "qps>=1,chat.ttft_p99<=1s,nowl.e2e_p99<=5s,other.qps>=2"
    objectives = slo.parse(text)
    slo.check_workloads(objectives[:2], {"chat"})  # the total and a workload of the run
    with pytest.raises(UsageError) as checked:
        slo.check_workloads(objectives, {"chat", "rag"})
    with pytest.raises(UsageError) as parsed:
        slo.parse(text, workloads={"chat", "rag"})
    assert str(checked.value) == str(parsed.value)
    assert str(checked.value) == "bad SLO 'nowl.e2e_p99<=5s': no workload 'nowl' in this run (chat, rag)"


def test_a_task_slo_is_one_grammar_and_gives_the_task_goodput_bound():
    objectives = slo.parse("ttft_p99<=1s,agent.task_p90<=30s")
    assert [(o.workload, o.metric, o.threshold) for o in objectives][1] == ("agent", "task_p90", 30.0)
    assert task_bound(objectives) == 30.0 and task_bound(slo.parse("ttft_p99<=1s")) is None
    verdict = slo.evaluate(objectives[1:], {"agent": {"task_s": {"p90": 31.0}}})[0]
    assert not verdict.ok and "agent.task_p90 <= 30.000s (measured 31.000s)" in verdict.describe()
