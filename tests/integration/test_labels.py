"""One vocabulary across what a person reads after one real `swarm run --sweep` (the simulator, a
master and a worker as processes): the same stage number in the live line, the interval table,
report.html, summary.json, stages.csv and the web UI's stage markers (from 1; `stage` stays the
0-based index), and cancelled requests drawn as cancelled in the report's timeline."""

from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest

from swarm.analysis.plots import render_plots
from swarm.analysis.rundir import load_run
from swarm.live.series import stage_markers
from tests.helpers.support import swarm_cmd

pytestmark = pytest.mark.integration


def test_stage_labels_agree_and_cancelled_is_drawn_as_cancelled(tmp_path):
    out = tmp_path / "run"
    # 8 users then 2: the ramp-down cuts requests of the 6 users it stops, and --stop-timeout 0
    # cuts those in flight at the end; both are cancelled, neither is a failure
    p = subprocess.run(
        swarm_cmd(
            "run", "--workers", "1", "--workload", "short_qa", "--sweep", "8,2", "--stage-time", "10s",
            "--warmup", "0s", "--stop-timeout", "0", "--out", str(out),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())

    # summary.json: the index is the key, the name is the label
    stages = summary["stages"]
    assert [(st["stage"], st["name"], st["users"]) for st in stages] == [(0, "stage 1", 8), (1, "stage 2", 2)]
    names = {st["name"] for st in stages}

    # the live line: every stage it names is one summary.json names, the last one among them
    live = re.findall(r"^\[(stage \d+)/2 \d+ users\]", p.stdout, re.M)
    assert live and set(live) <= names and "stage 2" in live, p.stdout[-3000:]

    # the interval table under the results table: the same names, with the users
    table = re.findall(r"^(stage \d+ \(\d+ users\))  ", p.stdout, re.M)
    assert table == ["stage 1 (8 users)", "stage 2 (2 users)"], p.stdout[-3000:]

    # report.html's Stages table: the same numbers beside the same users
    html = (out / "report.html").read_text()
    section = html[html.index("<h2>Stages</h2>") :]
    section = section[: section.index("<h2>", 4)]
    assert re.findall(r"<tr[^>]*><td>(\d+)</td><td>(\d+)</td>", section) == [("1", "8"), ("2", "2")]

    # stages.csv: both the key and the label
    with open(out / "stages.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["stage"], r["name"]) for r in rows] == [("0", "stage 1"), ("1", "stage 2")]

    # the web UI's stage markers (what the master serves at /llm/series), from the same timeline
    assert [m["label"] for m in stage_markers(summary["stage_timeline"])] == ["stage 2: 2 users"]

    # cancelled requests: counted apart in the summary, and drawn apart in the report's timeline
    cancelled = summary["total"]["cancelled"]
    failed = sum(summary["total"]["failures"].values())
    assert cancelled > 0, summary["total"]
    labels = [
        t.get_text()
        for t in render_plots(load_run(out), [])["requests_timeline.png"].axes[0].get_legend().get_texts()
    ]
    assert f"cancelled ({cancelled})" in labels, labels
    assert [x for x in labels if x.startswith("failed")] == ([f"failed ({failed})"] if failed else []), labels
