"""The run's end: summary.json, the closing lines and the exit code each judge sets."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from swarm.core import runfiles
from swarm.core.errors import EXIT_ABORTED
from swarm.live import outcome
from swarm.stats import slo


def _env(code=None):
    return SimpleNamespace(process_exit_code=code)


def _verdict(value):
    return slo.Verdict(slo.parse("total.ttft_p99<1s")[0], value)


@pytest.mark.parametrize(
    ("previous", "values", "code"),
    [(None, [0.5], 0), (None, [0.5, 2.0], 1), (None, [None], 1), (2, [0.5], 2), (0, [2.0], 1)],
)
def test_slos_set_the_exit_code(capsys, previous, values, code):
    env = _env(previous)
    outcome.judge_slos(env, [_verdict(v) for v in values])
    assert env.process_exit_code == code
    assert capsys.readouterr().out.count("SLO ") == len(values)


def test_search_abort_and_internal_errors(capsys, monkeypatch):
    env = _env(1)
    outcome.judge_search(
        env, {"search": {"headline": "from the table"}}, {"converged": True, "headline": "live"}
    )
    assert env.process_exit_code == 0 and "from the table" in capsys.readouterr().out
    outcome.judge_abort(env, {"reason": "too many errors"})
    assert env.process_exit_code == EXIT_ABORTED
    monkeypatch.setattr(outcome.locust_fixes, "internal_error_logged", lambda: False)
    outcome.judge_internal_errors(env, set(), "master")
    assert env.process_exit_code == EXIT_ABORTED  # nothing logged: unchanged
    outcome.judge_internal_errors(env, {"w-2"}, "master")
    assert env.process_exit_code == 2 and "worker w-2's log" in capsys.readouterr().out
    monkeypatch.setattr(outcome.locust_fixes, "internal_error_logged", lambda: True)
    outcome.judge_internal_errors(env, set(), "local")
    assert "in the log" in capsys.readouterr().out


def test_summary_written_and_a_failing_build_only_logged(tmp_path, caplog):
    outcome.write_summary({"run_id": "r"}, tmp_path / runfiles.SUMMARY)  # type: ignore[typeddict-item]
    assert json.loads((tmp_path / runfiles.SUMMARY).read_text()) == {"run_id": "r"}

    def broken():
        raise RuntimeError("no")

    outcome.write_summary_quietly(broken, tmp_path / runfiles.SUMMARY)
    assert "could not write summary.json" in caplog.text


@pytest.mark.parametrize(("previous", "code"), [(None, 1), (0, 1), (2, 2)])
def test_a_run_with_no_answered_request_fails(capsys, previous, code):
    env = _env(previous)
    outcome.judge_answers(env, {"requests": 4, "cancelled": 4, "failures": {}})
    assert env.process_exit_code == code and "no request completed: 4 sent" in capsys.readouterr().out
    answered = _env(previous)
    outcome.judge_answers(answered, {"requests": 4, "cancelled": 3, "failures": {}})
    assert answered.process_exit_code == previous
