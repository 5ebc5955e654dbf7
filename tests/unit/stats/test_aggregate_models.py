"""Several models (`--model a:3,b:1`): every record's model travels through the workers' aggregate
to the master exactly, and shows per model in summary.json, the table, /metrics (`model` label)
and the LLM tab; the models add up to the total exactly."""

from __future__ import annotations

import msgpack
import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.analysis.table import render as table
from swarm.live.exporter import ExportState, render
from swarm.live.webui import rows
from swarm.stats import summary
from swarm.stats.aggregate import WIRE_VERSION, Aggregate
from tests.helpers.synthetic import master_from_workers, synthetic_records

MODELS = ("base", "sql-lora")


def split_records(n: int = 3000):
    recs = synthetic_records(n, workloads=("short_qa", "chat"))
    for i, r in enumerate(recs):
        r.model = MODELS[1] if i % 4 == 3 else MODELS[0]
    return recs


def _fingerprint(agg: Aggregate) -> dict:
    """Every cell's wire form; latency sums rounded (float addition order differs between merges)."""
    out = {}
    for key, c in sorted(agg.cells.items()):
        w = c.to_wire()
        for lat in w["lat"].values():
            lat["sum"] = float(f"{lat['sum']:.9g}")
        n, total = w["warmup_ttft"]
        w["warmup_ttft"] = [n, float(f"{total:.9g}")]
        out[key] = w
    return out


def test_the_merge_over_workers_is_exact_per_model():
    recs = split_records()
    one = Aggregate()
    for r in recs:
        one.add(r)
    merged = master_from_workers(recs, n_workers=3)  # msgpack wire, three workers
    assert _fingerprint(merged) == _fingerprint(one)
    assert merged.models() == list(MODELS)
    for m in MODELS:
        mine = [r for r in recs if r.model == m]
        c = merged.combined(model=m)
        assert c.requests == len(mine)
        assert c.prompt_tokens == sum(r.prompt_tokens or 0 for r in mine)
        assert c.output_tokens == sum(r.output_tokens for r in mine)
    total = merged.combined()
    parts = [merged.combined(model=m) for m in MODELS]
    assert sum(p.requests for p in parts) == total.requests
    assert sum(p.latencies["ttft"].count for p in parts) == total.latencies["ttft"].count


def test_the_wire_refuses_an_older_version():
    agg = Aggregate()
    for r in split_records(20):
        agg.add(r)
    wire = msgpack.unpackb(msgpack.packb(agg.to_wire()), raw=False)
    assert wire["v"] == WIRE_VERSION >= 5 and {c["model"] for c in wire["cells"]} == set(MODELS)
    with pytest.raises(ValueError, match="wire format v4"):
        Aggregate.from_wire({**wire, "v": 4})


def test_models_beside_the_total_everywhere():
    recs = split_records()
    agg = master_from_workers(recs)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_060.0)
    assert set(s["models"]) == set(MODELS) and "classes" in s and "total" in s
    for key in ("requests", "prompt_tokens", "output_tokens", "reasoning_tokens"):
        assert sum(s["models"][m][key] for m in MODELS) == s["total"][key]
    assert s["models"]["sql-lora"]["requests"] == sum(r.model == "sql-lora" for r in recs)

    names = [line.split()[:2] for line in table(s).splitlines()[2:] if line.strip()]
    names = [" ".join(n) if n[0] == "model" else n[0] for n in names if n[0] != "failures"]
    assert names[-3:] == ["total", "model base", "model sql-lora"]

    prom = render(ExportState(aggregate=agg, run_id="r", model_name="base:3,sql-lora:1"))
    counts: dict[str, float] = {}
    for fam in text_string_to_metric_families(prom.decode()):
        if fam.name == "swarm_requests":
            for smp in fam.samples:
                assert smp.labels["model_name"] == "base:3,sql-lora:1"
                counts[smp.labels["model"]] = counts.get(smp.labels["model"], 0) + smp.value
    assert counts == {m: float(s["models"][m]["requests"]) for m in MODELS}

    tab = [r["name"] for r in rows(agg, {})]
    assert tab == ["chat", "short_qa", "Total", "model base", "model sql-lora"]


def test_one_model_adds_no_rows():
    recs = synthetic_records(200, workloads=("short_qa",))
    for r in recs:
        r.model = "base"
    agg = master_from_workers(recs)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_060.0)
    assert list(s["models"]) == ["base"] and s["models"]["base"]["requests"] == s["total"]["requests"]
    assert [r["name"] for r in rows(agg, {})] == ["short_qa", "Total"]
    assert not any(line.startswith("  model") for line in table(s).splitlines())
