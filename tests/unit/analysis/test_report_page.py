"""The report's page: the run's line says an early end, the findings list says when it is empty, the
error messages and figures are embedded, escaped."""

from __future__ import annotations

import base64
import dataclasses

from swarm.analysis.finding import Finding
from swarm.analysis.report_page import render_html
from swarm.analysis.rundir import load_run
from tests.helpers.sweep_run import SHORT_QA, make_run


def test_the_page_says_an_early_end_and_the_error_messages(tmp_path):
    data = load_run(make_run(tmp_path / "run", table=SHORT_QA[:2]))
    data.summary["aborted"] = {"reason": "ttft_p99>2s"}
    data.summary["degraded"] = True
    data.summary["errors"] = {"timeout": [{"count": 3, "message": "read <timed> out"}]}
    text = render_html(data, [Finding("saturation", 0, "Ceiling & more.", trusted=False)], {"a.png": b"PNG"})
    assert "ABORTED: ttft_p99&gt;2s" in text and "DEGRADED" in text
    assert "3 &times; <code>read &lt;timed&gt; out</code>" in text
    assert "<li class='untrusted'><span class='k'>saturation</span> Ceiling &amp; more.</li>" in text
    assert f"data:image/png;base64,{base64.b64encode(b'PNG').decode()}" in text


def test_no_findings_and_no_figures_are_said(tmp_path):
    data = load_run(make_run(tmp_path / "run", table=SHORT_QA[:1], server=False))
    text = render_html(data, [], {})
    assert "<li>No findings.</li>" in text and "Static figures" not in text  # no PNG: none folded in
    assert "No server metrics: nothing to compare." in text
    assert "id='chart-throughput'" in text and "id='chart-pareto'" not in text  # the charts all the same
    bare = render_html(dataclasses.replace(data, rows=[], records=None), [], {})
    assert "nothing to chart" in bare and "<script" not in bare


def test_the_model_the_target_named_is_one_bounded_line_on_the_page(tmp_path):
    """/v1/models' id reaches summary.json's model_name: on the run's line its control characters
    are written out, its markup escaped and its length cut (issue 41)."""
    data = load_run(make_run(tmp_path / "run", table=SHORT_QA[:1], server=False))
    data.summary["model_name"] = "m\r\n<b>forged</b>\u202e" + "x" * 500
    text = render_html(data, [], {})
    meta = next(line for line in text.splitlines() if line.startswith('<p class="meta">run'))
    assert "model m\\x0d\\x0a&lt;b&gt;forged&lt;/b&gt;\\u202e" in meta and "x" * 200 not in meta
    assert "xxx…" in meta
