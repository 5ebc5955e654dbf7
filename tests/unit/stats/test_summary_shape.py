"""summary.json's shape against its types (swarm/stats/summary_shape.py), and `swarm twin fit` and
`swarm report` on a summary of the wrong shape: one line naming the file and what is wrong, exit 2."""

from __future__ import annotations

import json

import pytest

from swarm.cli import main
from swarm.stats.summary_shape import problem
from tests.helpers.support import DATA


@pytest.mark.parametrize(
    "data, said",
    [
        ([], "a JSON list, not an object"),
        ("x", "a JSON str, not an object"),
        ({"stages": 5}, "stages is a number, not a list"),
        ({"stages": [5]}, "stages[0] is a number, not an object"),
        ({"stages": [{"stage": "a"}]}, "stages[0].stage is a string, not a whole number"),
        ({"stages": [{"stage": 0, "total": 5}]}, "stages[0].total is a number, not an object"),
        (
            {"stages": [{"stage": 0, "total": {"ttft_s": {"p99": "x"}}}]},
            "stages[0].total.ttft_s.p99 is a string",
        ),
        ({"slo": 3}, "slo is a number, not a list"),
        (
            {"total": {"failures": {"http_500": True}}},
            "total.failures.http_500 is a boolean, not a whole number",
        ),
        ({"users": 1.5}, "users is a number, not a whole number"),
        # the search's block is typed too: `swarm report` read probes as a list and raised
        ({"search": {"probes": 5}}, "search.probes is a number, not a list"),
        ({"search": {"probes": [{"stage": "a"}]}}, "search.probes[0].stage is a string, not a whole number"),
    ],
)
def test_a_summary_of_another_shape_is_named(data, said):
    assert said in (problem(data) or "")


def test_what_the_writers_write_is_a_summary():
    for path in DATA.glob("**/summary.json"):
        assert problem(json.loads(path.read_text())) is None, path
    older = {"stages": [{"stage": 0, "total": {"qps": 3, "ttft_s": {"p99": None}}}], "notes": ["virtual"]}
    assert problem(older) is None  # keys lacking, an int for a float, a null where one may be
    assert problem({"my_workload": {"anything": [1]}, "search": {"probes": [], "later_key": 1}}) is None


@pytest.mark.parametrize("command", ["twin fit", "report"])
@pytest.mark.parametrize("text", ['{"stages": 5}', '{"stages": [{"stage": 0, "total": 5}]}'])
def test_twin_fit_and_report_say_it_in_one_line(tmp_path, capsys, command, text):
    (tmp_path / "summary.json").write_text(text)
    assert main([*command.split(), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'summary.json'} is not a readable summary (stages" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
