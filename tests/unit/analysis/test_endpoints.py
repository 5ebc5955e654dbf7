"""Several endpoints in one run (swarm/analysis/endpoints.py): each endpoint diagnosed on its own
records and scrapes, the causes set side by side, an endpoint that stopped answering named."""

from __future__ import annotations

import json
import shutil

import pandas as pd

from swarm.analysis.endpoints import contrasts, outage_text, outages, run_findings
from swarm.analysis.finding import Finding
from swarm.analysis.report import write_report
from swarm.analysis.rundir import load_run
from swarm.analysis.server_metrics import unobservable_path
from swarm.core.records import Outcome, RequestRecord
from swarm.core.runfiles import ENDPOINTS_JSON, endpoint_metrics_name
from tests.helpers.sweep_run import T0, make_run

A, B = "http://127.0.0.1:8001", "http://127.0.0.1:8002"


def two_endpoint_run(tmp_path):
    """The seed's sweep twice: endpoint A's KV fills (96%, preemptions), endpoint B's stays at a
    third of it; one run directory as `swarm run --host A,B` leaves it."""
    kv = make_run(tmp_path / "a", kv_scale=1.0)
    roomy = make_run(tmp_path / "b", kv_scale=0.3)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(kv / "summary.json", run / "summary.json")
    shutil.copy(kv / "client_cpu.jsonl", run / "client_cpu.jsonl")
    recs = []
    for src, label in ((kv, A), (roomy, B)):
        df = pd.read_parquet(src / "requests.parquet")
        df["endpoint"] = label
        recs.append(df)
    pd.concat(recs).to_parquet(run / "requests.parquet")
    shutil.copy(kv / "server_metrics.jsonl", run / endpoint_metrics_name(0))
    shutil.copy(roomy / "server_metrics.jsonl", run / endpoint_metrics_name(1))
    index = [{"label": A, "server_metrics": endpoint_metrics_name(0)},
             {"label": B, "server_metrics": endpoint_metrics_name(1)}]  # fmt: skip
    (run / ENDPOINTS_JSON).write_text(json.dumps({"endpoints": index}))
    return run


def test_each_endpoint_is_diagnosed_on_its_own_and_the_causes_set_side_by_side(tmp_path):
    data = load_run(two_endpoint_run(tmp_path))
    assert list(data.endpoints) == [A, B] and not data.snapshots  # no server speaks for the whole
    assert [len(e.snapshots) for e in data.endpoints.values()] == [61, 61]
    assert sum(r.requests for e in data.endpoints.values() for r in e.rows) == len(data.records)
    found = run_findings(data)
    kinds = [f.kind for f in found]
    assert "no_server_metrics" not in kinds and "saturation" in kinds  # the whole's client side
    kv = [f.text for f in found if f.kind == "kv_bound"]
    assert len(kv) == 1 and kv[0].startswith(f"endpoint {A}: ") and "96%" in kv[0]
    differ = [f.text for f in found if f.kind == "endpoints_differ"]
    assert f"endpoint {A} is KV-bound; endpoint {B} is not." in differ
    # each endpoint's totals reconciled with its own server's counters
    assert any(f.kind == "client_vs_server" and f.text.startswith(f"endpoint {B}: ") for f in found)


def test_the_report_has_an_endpoints_section(tmp_path):
    run = two_endpoint_run(tmp_path)
    text = write_report(run).read_text()
    assert "<h2>Endpoints (2)</h2>" in text and f"<td>{A}</td>" in text and f"<td>{B}</td>" in text
    assert (
        "is KV-bound; endpoint" in text
        and "2 endpoints, server metrics (scrapes): vllm (61), vllm (61)" in text
    )
    found = json.loads((run / "diagnosis.json").read_text())
    assert any(f["kind"] == "endpoints_differ" for f in found)
    # client vs server: each endpoint against its own server, not "nothing to compare"
    section = text.split("<h2>Client vs server</h2>", 1)[1].split("<h2>", 1)[0]
    assert f"<h3>endpoint {A}</h3>" in section and f"<h3>endpoint {B}</h3>" in section
    assert "nothing to compare" not in section and section.count("<p class='meta'>Times in ms. TTFT") == 2


def test_an_unobservable_endpoint_is_said_with_its_own_poller_reason(tmp_path):
    """Endpoint B's poller scraped nothing and left its reason beside its own scrapes' file (a
    scrape over the cap, say): B's diagnosis names that reason, A's stays observed."""
    run = two_endpoint_run(tmp_path)
    (run / endpoint_metrics_name(1)).unlink()
    why = "a scrape of more than 16,777,216 bytes (the cap per scrape) at http://127.0.0.1:8002/metrics"
    unobservable_path(run / endpoint_metrics_name(1)).write_text(why + "\n")
    found = run_findings(load_run(run))
    said = [f.text for f in found if f.kind == "no_server_metrics"]
    assert len(said) == 1 and said[0].startswith(f"endpoint {B}: Server side not observable ({why}): "), said
    assert any(f.kind == "kv_bound" and f.text.startswith(f"endpoint {A}: ") for f in found)
    # B's causes cannot be told from no figures: not "B is not KV-bound"
    differ = [f.text for f in found if f.kind == "endpoints_differ"]
    assert f"endpoint {A} is KV-bound; endpoint {B}: not told (its server figures failed a sanity check or were not scraped)." in differ, differ  # fmt: skip
    assert not any(f"{B} is not" in t for t in differ), differ


def test_an_endpoint_whose_figures_failed_a_check_is_not_told_apart():
    """A KV-bound, B's cause withheld (its /metrics failed a check), C judged and not KV-bound."""
    C = "http://127.0.0.1:8003"
    per = {
        A: [Finding("kv_bound", 0, "KV-bound.")],
        B: [Finding("server_check_failed", 0, "failed a sanity check.", trusted=False)],
        C: [Finding("client_vs_server", None, "Requests reconcile.")],
    }
    assert [f.text for f in contrasts(per)] == [
        f"endpoint {A} is KV-bound; endpoint {C} is not; endpoint {B}: not told (its server figures "
        "failed a sanity check or were not scraped)."
    ]


def rec(endpoint, t, outcome=Outcome.OK, error=None, e2e=1.0):
    return RequestRecord("short_qa", T0 + t, outcome, e2e_s=e2e, error=error, endpoint=endpoint).to_dict()


REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


def test_an_endpoint_that_stopped_answering_is_named_with_its_failures():
    rows = [rec(A, t) for t in range(20)]
    rows += [rec(B, t) for t in range(10)]
    rows += [rec(B, 9.5, Outcome.TRUNCATED, "stream broken: reset", e2e=0.7)]  # in flight at the kill
    rows += [rec(B, t, Outcome.CONNECT_ERROR, REFUSED, e2e=0.001) for t in range(11, 20)]
    rows += [rec(B, 20, Outcome.CANCELLED)]  # the run's own stop: not a failure
    # a blip: a refused connection, then answers again: not an outage
    rows += [rec("http://c:1", 1, Outcome.CONNECT_ERROR, REFUSED), rec("http://c:1", 2)]
    got = outages(pd.DataFrame(rows))
    assert len(got) == 1
    o = got[0]
    assert (o.label, o.failed, o.by_outcome, o.message) == (
        B,
        10,
        {"connect_error": 9, "truncated": 1},
        REFUSED,
    )
    assert o.since_s == T0 + 10.2  # the truncated one's end, the first failure
    text = outage_text(o, T0)
    assert text.startswith(f"endpoint {B} stopped answering at ") and "(10.2 s into the run)" in text
    assert text.endswith(f"10 requests failed (connect_error 9: {REFUSED}; truncated 1)")


def test_one_endpoint_has_no_endpoint_findings(tmp_path):
    data = load_run(make_run(tmp_path / "one"))
    assert data.endpoints == {}
    assert not [f for f in run_findings(data) if f.kind in ("endpoints_differ", "endpoint_down")]
    assert outages(None) == [] and outages(pd.DataFrame([rec(A, 1)]).drop(columns="endpoint")) == []
