"""The report's figures say what the tables say: cancelled requests drawn as cancelled (not failed),
and stages numbered as every label numbers them (from 1)."""

from __future__ import annotations

import dataclasses

import pytest

from swarm.analysis.plots import render_plots, thinned_labels
from swarm.analysis.rundir import load_run
from tests.helpers.sweep_run import make_run


def legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


@pytest.fixture
def run(tmp_path):
    return load_run(make_run(tmp_path / "run", table=[(8, 10.0, 0.2), (16, 14.0, 0.3), (32, 15.0, 0.5)]))


def test_timeline_draws_cancelled_apart_from_failed(run):
    df = run.records.assign(outcome="ok")
    df.loc[df.index[:3], "outcome"] = "cancelled"  # cut by the swarm's own stop or ramp-down
    df.loc[df.index[3:5], "outcome"] = "timeout"
    figs = render_plots(dataclasses.replace(run, records=df), [])
    assert legend(figs["requests_timeline.png"]) == ["TTFT (ok)", "failed (2)", "cancelled (3)"]
    only_cancelled = df.assign(outcome=["cancelled"] * 4 + ["ok"] * (len(df) - 4))
    figs = render_plots(dataclasses.replace(run, records=only_cancelled), [])
    assert legend(figs["requests_timeline.png"]) == ["TTFT (ok)", "cancelled (4)"]  # no "failed" at all


def test_stage_axis_and_lines_number_stages_from_one(run):
    # without user counts (a plain Locust run's stages): the x axis and the stage lines say the stage
    rows = [dataclasses.replace(r, users=None) for r in run.rows]
    figs = render_plots(dataclasses.replace(run, rows=rows), [])
    ax = figs["qps_vs_concurrency.png"].axes[0]
    assert ax.get_xlabel() == "stage"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    marks = [t.get_text() for t in figs["requests_timeline.png"].axes[0].texts]
    assert marks == ["stage 1", "stage 2", "stage 3"]


def test_close_loads_tick_labels_are_thinned_not_printed_over_each_other():
    x = [10.0, 213.0, 218.0, 221.0, 224.0, 256.0]
    assert thinned_labels(x, [str(int(v)) for v in x]) == ["10", "213", "", "", "", "256"]
    assert thinned_labels([1.0, 2.0, 3.0], ["1", "2", "3"]) == ["1", "2", "3"]
