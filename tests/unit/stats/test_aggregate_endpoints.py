"""Several endpoints (`--host URL1,URL2`): every record's endpoint travels through the workers'
aggregate to the master exactly (wire v7), and shows per endpoint in summary.json, the table,
/metrics (`endpoint` label) and the LLM tab; the endpoints add up to the total exactly."""

from __future__ import annotations

import msgpack
import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.analysis.table import render as table
from swarm.live.exporter import ExportState, render
from swarm.live.webui import rows
from swarm.stats import summary
from swarm.stats.aggregate import WIRE_VERSION, Aggregate
from swarm.stats.rates import counts
from tests.helpers.synthetic import master_from_workers, synthetic_records

ENDPOINTS = ("http://10.0.0.1:8000", "http://10.0.0.2:8000")


def endpoint_records(n: int = 3000):
    recs = synthetic_records(n, workloads=("short_qa", "chat"))
    for i, r in enumerate(recs):
        r.endpoint = ENDPOINTS[i % 3 == 2]  # 2:1
    return recs


def test_the_merge_over_workers_is_exact_per_endpoint():
    recs = endpoint_records()
    one = Aggregate()
    for r in recs:
        one.add(r)
    merged = master_from_workers(recs, n_workers=3)  # msgpack wire, three workers
    assert sorted(merged.cells) == sorted(one.cells) and merged.endpoints() == list(ENDPOINTS)
    for key, c in one.cells.items():
        assert merged.cells[key].to_wire()["outcomes"] == c.to_wire()["outcomes"]
    for e in ENDPOINTS:
        mine = [r for r in recs if r.endpoint == e]
        c = merged.combined(endpoint=e)
        assert c.requests == len(mine) and c.endpoint == e
        assert c.output_tokens == sum(r.output_tokens for r in mine)
        assert c.latencies["ttft"].count == sum(r.ok and not r.warmup and r.ttft_s is not None for r in mine)
    parts = [merged.combined(endpoint=e) for e in ENDPOINTS]
    total = merged.combined()
    assert sum(p.requests for p in parts) == total.requests == len(recs)
    assert sum(p.latencies["e2e"].count for p in parts) == total.latencies["e2e"].count


def test_the_wire_carries_the_endpoint_and_refuses_v6():
    agg = Aggregate()
    for r in endpoint_records(30):
        agg.add(r)
    wire = msgpack.unpackb(msgpack.packb(agg.to_wire()), raw=False)
    assert wire["v"] == WIRE_VERSION == 9 and {c["endpoint"] for c in wire["cells"]} == set(ENDPOINTS)
    back = Aggregate.from_wire(wire)
    assert {e: back.combined(endpoint=e).requests for e in ENDPOINTS} == {
        e: agg.combined(endpoint=e).requests for e in ENDPOINTS
    }
    with pytest.raises(ValueError, match="wire format v6"):
        Aggregate.from_wire({**wire, "v": 6})


def test_endpoints_beside_the_total_everywhere():
    recs = endpoint_records()
    agg = master_from_workers(recs)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_060.0)
    assert list(s["endpoints"]) == list(ENDPOINTS)
    assert set(s["endpoints"][ENDPOINTS[0]]) == set(next(iter(s["models"].values())))  # a model's block shape
    for key in ("requests", "prompt_tokens", "output_tokens", "reasoning_tokens"):
        assert sum(s["endpoints"][e][key] for e in ENDPOINTS) == s["total"][key]
    assert s["endpoints"][ENDPOINTS[1]]["requests"] == sum(r.endpoint == ENDPOINTS[1] for r in recs)

    names = [line.split()[:2] for line in table(s).splitlines()[2:] if line.strip()]
    names = [" ".join(n) if n[0] == "endpoint" else n[0] for n in names if n[0] != "failures"]
    assert names[-3:] == ["total", *(f"endpoint {e}" for e in ENDPOINTS)]

    prom = render(ExportState(aggregate=agg, run_id="r", model_name="m"))
    by_endpoint: dict[str, float] = {}
    for fam in text_string_to_metric_families(prom.decode()):
        if fam.name == "swarm_requests":
            for smp in fam.samples:
                by_endpoint[smp.labels["endpoint"]] = by_endpoint.get(smp.labels["endpoint"], 0) + smp.value
    assert by_endpoint == {e: float(s["endpoints"][e]["requests"]) for e in ENDPOINTS}

    tab = [r["name"] for r in rows(agg, {})]
    assert tab == ["chat", "short_qa", "Total", *(f"endpoint {e}" for e in ENDPOINTS)]
    c = counts(agg)
    assert {e: c[f"endpoint:{e}"][0] for e in ENDPOINTS} == {
        e: s["endpoints"][e]["requests"] for e in ENDPOINTS
    }


def test_one_endpoint_adds_no_block_and_no_rows():
    recs = synthetic_records(200, workloads=("short_qa",))
    for r in recs:
        r.endpoint = ENDPOINTS[0]
    agg = master_from_workers(recs)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_060.0)
    assert "endpoints" not in s and agg.endpoints() == [ENDPOINTS[0]]
    assert [r["name"] for r in rows(agg, {})] == ["short_qa", "Total"]
    assert not any(line.startswith("  endpoint") for line in table(s).splitlines())
