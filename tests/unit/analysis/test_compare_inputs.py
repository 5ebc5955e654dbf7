"""swarm/analysis/compare_inputs.py: compare's inputs (runs, a tune directory, TUNEDIR:CONFIG) and
the same-workload check, each bad input one line."""

from __future__ import annotations

import json

import pytest

from swarm.analysis.compare_inputs import resolve, workload_differences
from swarm.analysis.rundir import load_run
from swarm.core.errors import UsageError
from tests.helpers.sweep_run import SHORT_QA, make_run


def test_runs_a_tune_directory_and_a_named_configuration(tmp_path):
    a, b = make_run(tmp_path / "a", records=False), make_run(tmp_path / "b", records=False)
    assert resolve([str(a), str(b)]) == [a, b]
    tune = tmp_path / "tune"
    tune.mkdir()
    (tune / "tune.json").write_text(json.dumps({"configs": [{"name": "np4", "run_dir": str(a)},
                                                            {"name": "np8", "run_dir": str(b)}]}))  # fmt: skip
    assert resolve([str(tune)]) == [a, b]
    assert resolve([f"{tune}:np8", str(a)]) == [b, a]
    with pytest.raises(UsageError, match="no configuration 'np2'"):
        resolve([f"{tune}:np2", str(a)])


@pytest.mark.parametrize("bad", [["nowhere", "nowhere2"], ["ONE"]])
def test_bad_inputs_are_one_line(tmp_path, bad):
    one = make_run(tmp_path / "ONE", records=False)
    args = [str(one) if x == "ONE" else str(tmp_path / x) for x in bad]
    with pytest.raises(UsageError) as e:
        resolve(args)
    assert "\n" not in str(e.value)


def test_another_stage_plan_is_a_workload_difference(tmp_path):
    a = load_run(make_run(tmp_path / "a", table=SHORT_QA[:3], records=False))
    b = load_run(make_run(tmp_path / "b", table=SHORT_QA[:2], records=False))
    assert workload_differences(a, a) == []
    (said,) = workload_differences(a, b)
    assert said.startswith("stages (users, rate)")
