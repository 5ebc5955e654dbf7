"""Request classes: every record's class travels through the workers' aggregate to the master and
shows beside its workload's total in summary.json, the table, /metrics (`class` label) and the
LLM tab; the classes of a workload add up to it exactly."""

from __future__ import annotations

import random

from prometheus_client.parser import text_string_to_metric_families

from swarm.analysis.table import render as table
from swarm.live.exporter import ExportState, render
from swarm.live.webui import rows
from swarm.load.workloads import build
from swarm.stats import summary
from tests.helpers.synthetic import master_from_workers, synthetic_records


def classed_records(n: int = 3000):
    recs = synthetic_records(n, workloads=("mixed", "short_qa"))
    rng = random.Random(5)
    for r in recs:
        if r.workload == "mixed" and rng.random() < 0.2:
            r.request_class = "thinking"
    return recs


def test_mixed_draws_direct_and_thinking_classes():
    rng = random.Random(1)
    reqs = [build("mixed").next_request(rng) for _ in range(2000)]
    # user.py: request_class or ("thinking" if thinking else "direct")
    classes = [r.request_class or ("thinking" if r.thinking else "direct") for r in reqs]
    assert 0.17 < classes.count("thinking") / len(classes) < 0.23 and set(classes) == {"direct", "thinking"}


def test_classes_beside_the_workload_total_everywhere():
    recs = classed_records()
    agg = master_from_workers(recs)  # through the wire, merged from three workers
    assert agg.classes("mixed") == ["direct", "thinking"] and agg.classes("short_qa") == ["direct"]
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_060.0)
    mixed = s["classes"]["mixed"]
    assert set(mixed) == {"direct", "thinking"}
    assert mixed["direct"]["requests"] + mixed["thinking"]["requests"] == s["mixed"]["requests"]
    assert mixed["thinking"]["requests"] == sum(
        r.workload == "mixed" and r.request_class == "thinking" for r in recs
    )
    assert (
        mixed["thinking"]["output_tokens"] + mixed["direct"]["output_tokens"] == s["mixed"]["output_tokens"]
    )

    text = table(s)
    names = [
        line.split()[0] for line in text.splitlines()[2:] if line.strip() and not line.startswith("failures")
    ]
    assert names == ["mixed", "mixed/direct", "mixed/thinking", "short_qa", "total"]

    prom = render(ExportState(aggregate=agg, run_id="r", model_name="m"))
    counts: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(prom.decode()):
        if fam.name == "swarm_requests":
            for smp in fam.samples:
                key = (smp.labels["workload"], smp.labels["class"])
                counts[key] = counts.get(key, 0) + smp.value
    assert set(counts) == {("mixed", "direct"), ("mixed", "thinking"), ("short_qa", "direct")}
    assert counts[("mixed", "direct")] + counts[("mixed", "thinking")] == s["mixed"]["requests"]

    tab = [r["name"] for r in rows(agg, {})]
    assert tab == ["mixed", "mixed / direct", "mixed / thinking", "short_qa", "Total"]
