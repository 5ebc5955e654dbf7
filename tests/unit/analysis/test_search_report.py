"""A `--search` run in the report: the Search section (answer, why, every probe, the bracket after
each), search.png, the ceiling read along the load rather than the probe order, and a stage the
saturation guard ended early."""

from __future__ import annotations

import json

from swarm.analysis.report import write_report
from swarm.analysis.rundir import load_run
from swarm.analysis.search import bottleneck, early_ends, settling_note
from swarm.stats.search_bracket import Bracket, Probe
from swarm.stats.search_spec import SearchSpec
from tests.helpers.sweep_run import images, make_run

# the seed's short-QA numbers, in the order a search from 64 users probes them
PROBED = [(64, 45.2, 0.292), (128, 60.2, 0.419), (256, 64.7, 0.843), (224, 64.8, 0.78)]


def search_run(tmp_path):
    run = make_run(tmp_path / "search", table=PROBED, slo=None, cap=200)
    b = Bracket(SearchSpec.parse("concurrency", "ttft_p99<=800ms", None, "15%", "5m", 64))
    for stage, (users, qps, p99) in enumerate(PROBED):
        assert b.next_load() == users  # the search itself asks for these loads
        b.record(
            Probe(stage, users, p99 <= 0.8, qps, p99, p99 / 0.8, 10.0, "decided", {"ttft_p99<=800ms": p99})
        )
    assert b.next_load() is None and b.status == "converged"
    s = json.loads((run / "summary.json").read_text())
    s["search"] = b.answer() | {"headline": "max concurrency meeting the SLO: 224 (bracket 224-256)"}
    (run / "summary.json").write_text(json.dumps(s))
    return run


def test_search_section_probes_and_plot(tmp_path):
    run = search_run(tmp_path)
    text = write_report(run).read_text()
    section = text[text.index("<h2>Search</h2>") : text.index("<h2>Diagnosis</h2>")]
    assert "max concurrency meeting the SLO: 224 (bracket 224-256)" in section
    assert section.count("<tr>") == 1 + len(PROBED)  # header + one row per probe
    assert "224 - 256" in section and "128 - -" in section  # the bracket after the last and the second probe
    # why: the server at 256 users, the first failing load, in the diagnosis' own sentence, once
    assert "Why: At 256 users the server was KV-bound: KV-cache usage peaked" in section, section
    assert "KV-bound: At" not in text
    why = bottleneck(load_run(run))
    assert why is not None and why.kind == "kv_bound" and why.stage == 2
    # the probes are numbered by their stage, as the Stages table numbers them (from 1)
    assert [row.split("</td>")[0] for row in section.split("<tr><td>")[1:]] == ["1", "2", "3", "4"]
    stages = text[text.index("<h2>Stages</h2>") :]
    assert "<td>1</td><td>64</td>" in stages and "<td>4</td><td>224</td>" in stages
    assert "search.png" in text and len(images(text)) >= 4
    found = {f["kind"]: f["text"] for f in json.loads((run / "diagnosis.json").read_text())}
    # along the load: 128 -> 224 -> 256 users, not the probe order 256 -> 224
    assert found["saturation"].startswith("Ceiling at 224 users: going to 256 users"), found["saturation"]


def test_early_ended_stage_is_reported(tmp_path):
    run = make_run(tmp_path / "rate", table=PROBED[:1], slo=None)
    s = json.loads((run / "summary.json").read_text())
    why = "over-saturated: requests waiting grew 12 -> 480 over 20 s, TTFT 90 -> 4100 ms; the server does not keep up"
    s["stages"][0].update(ended_by=why, rate=120.0)
    (run / "summary.json").write_text(json.dumps(s))
    assert early_ends(s) == [f"stage 1 (120 req/s) ended early: {why}"]
    assert "ended early: over-saturated" in write_report(run).read_text()
    assert "<h2>Search</h2>" not in write_report(run).read_text()


def test_settling_is_reported_per_probe_and_per_sweep_stage(tmp_path):
    """How long each stage needed to settle: the search's probe table, and a note for a sweep."""
    run = search_run(tmp_path)
    s = json.loads((run / "summary.json").read_text())
    s["search"]["probes"][0].update(settle_s=6.0, settled=True)
    s["search"]["probes"][1].update(settle_s=30.0, settled=False, ok=None)
    (run / "summary.json").write_text(json.dumps(s))
    section = write_report(run).read_text()
    assert "<th>settling</th>" in section and "<td>settled after 6 s</td>" in section
    assert "unsettled (30 s: its figures are no verdict)" in section and "<td>inconclusive</td>" in section
    sweep = make_run(tmp_path / "sweep", table=PROBED[:2], slo=None)
    s = json.loads((sweep / "summary.json").read_text())
    s["stages"][0].update(settled=True, warmup_s=9.0)
    s["stages"][1].update(settled=False, warmup_s=10.0)
    (sweep / "summary.json").write_text(json.dumps(s))
    note = settling_note(s)
    assert note == (
        "Stages measured once settled: stage 1 (64 users) settled after 9 s; "
        "stage 2 (128 users) unsettled when measured from 10 s."
    )
    assert note in write_report(sweep).read_text()
