"""The results table with --goodput (two columns, a line) and the 95% interval block under it."""

from __future__ import annotations

import dataclasses

from swarm.analysis.table import ci_rows, ci_table, header, interval_text, render, render_ci
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.goodput import parse_goodput
from tests.helpers.synthetic import synthetic_records

START = 1_700_000_000.0


def _summary(goodput: bool, seconds: float = 40.0) -> dict:
    spec = parse_goodput("e2e<=3s") if goodput else None
    agg = Aggregate(spec)
    for i, r in enumerate(synthetic_records(800, workloads=("chat",), stages=(0, 1))):
        # spread the sends over the window, so completions fall into its bins
        agg.add(dataclasses.replace(r, start_wall_s=START + (i % 400) * seconds / 400, warmup=False))
    return summary.build(
        agg,
        run_id="r",
        start_s=START,
        end_s=START + seconds,
        stage_windows={0: (START, START + seconds / 2), 1: (START + seconds / 2, START + seconds)},
        goodput_slo=spec.text if spec else None,
    )


def test_goodput_columns_only_with_goodput():
    with_g, without = _summary(True), _summary(False)
    assert header(with_g)[-2:] == ["good/s", "good %"] and "good/s" not in header(without)
    text = render(with_g)
    g = with_g["total"]["goodput"]
    assert f"{g['rate']:.2f}" in text and f"{g['share'] * 100:.1f}%" in text
    assert "goodput: requests meeting every one of e2e<=3s" in text
    assert "good/s" not in render(without) and "goodput" not in render(without)


def test_the_interval_block():
    s = _summary(True)
    head, rows = ci_rows(s)
    assert head[:2] == ["stage", "QPS [95% CI]"] and head[-1] == "good %"
    # each stage named as summary.json `name` and every label name it: from 1 (indexes 0 and 1)
    assert [r[0] for r in rows] == ["stage 1", "stage 2", "run"]
    assert [st["name"] for st in s["stages"]] == ["stage 1", "stage 2"]
    lo, hi = s["total"]["ci"]["qps"]
    assert rows[-1][1] == f"{s['total']['qps']:.2f} [{lo:.2f}, {hi:.2f}]"
    block = render_ci(s)
    assert block is not None and block.startswith("95% confidence intervals")
    assert interval_text({"qps": 3.0}, "qps") == "3.00"  # no interval: the value alone
    short = _summary(False, seconds=0.8)  # under two 0.5 s bins per stage and for the run
    qps_reason = short["total"]["ci"]["reasons"]["qps"]
    head, rows, notes = ci_table(short)
    assert short["total"]["ci"]["qps"] is None and "degrees of freedom" in qps_reason
    assert rows[-1][1] == f"{short['total']['qps']:.2f} — [1]" and notes[0] == f"[1] {qps_reason}"
    assert all(r[1].endswith("— [1]") for r in rows)  # one footnote per distinct reason
    text = render_ci(short)  # the percentiles still have intervals: the block shows, with the notes
    assert text is not None and text.endswith("\n".join(notes)) and "p99 needs >= 368" in text
    assert interval_text(short["total"], "qps") == f"{short['total']['qps']:.2f} —"  # no notes given
    bare = {"stages": [], "total": {"qps": 1.0, "ci": {"qps": None, "reasons": {"qps": "x"}}}}
    assert render_ci(bare) is None  # no interval anywhere: no block
