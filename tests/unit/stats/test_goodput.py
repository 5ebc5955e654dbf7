"""--goodput: the spec's grammar, the per-request check (as vLLM bench / AIPerf define it), and the
cell counts: exact over any split of the records across workers (msgpack wire), as summary.json,
/metrics and the LLM tab show them."""

from __future__ import annotations

import dataclasses
import random

import msgpack
import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.core.errors import UsageError
from swarm.core.records import Outcome, RequestRecord
from swarm.live import webui
from swarm.live.exporter import ExportState, render
from swarm.stats import summary
from swarm.stats.aggregate import Aggregate
from swarm.stats.goodput import parse_goodput
from tests.helpers.synthetic import synthetic_records

SPEC = "ttft<=500ms,tpot<=50ms,e2e<=10s"


def rec(**kw) -> RequestRecord:
    base = {
        "workload": "w",
        "start_wall_s": 1000.0,
        "ttft_s": 0.2,
        "tpot_s": 0.02,
        "e2e_s": 2.0,
        "output_tokens": 50,
    }
    return RequestRecord(**{**base, **kw})


def test_the_grammar():
    spec = parse_goodput(SPEC)
    assert [(b.metric, b.threshold_s, b.strict) for b in spec.bounds] == [
        ("ttft", 0.5, False),
        ("tpot", 0.05, False),
        ("e2e", 10.0, False),
    ]
    assert spec.text == SPEC
    assert [b.metric for b in parse_goodput("e2el<2 , ttfa<=0.3").bounds] == ["e2e", "ttfa"]
    for bad, why in (
        ("", "empty"),
        ("ttft>=1s", "cannot read"),
        ("itl<=5ms", "unknown metric"),
        ("ttft<=1s,ttft<=2s", "twice"),
        ("ttft<=0ms", "> 0"),
        ("ttft<=fast", "cannot read"),
    ):
        with pytest.raises(UsageError, match=why):
            parse_goodput(bad)


def test_the_check():
    spec = parse_goodput(SPEC)
    assert spec.met(rec())
    assert not spec.met(rec(ttft_s=0.5001))
    assert spec.met(rec(ttft_s=0.5))  # <= holds at the bound
    assert not parse_goodput("ttft<500ms").met(rec(ttft_s=0.5))  # < does not
    assert not spec.met(rec(e2e_s=10.5)) and not spec.met(rec(tpot_s=0.06))
    assert not spec.met(rec(outcome=Outcome.HTTP_ERROR))  # a failure is never good
    assert not spec.met(rec(ttft_s=None))  # a missing metric is not good (AIPerf)
    assert spec.met(rec(tpot_s=None, output_tokens=1))  # ... but TPOT of one token is 0 (vLLM bench)
    assert not spec.met(rec(tpot_s=None, output_tokens=5))
    assert spec.counted(rec()) and spec.counted(rec(outcome=Outcome.TIMEOUT))
    assert not spec.counted(rec(warmup=True)) and not spec.counted(rec(outcome=Outcome.CANCELLED))


def _records(n=3000):
    rng = random.Random(7)
    out = []
    for r in synthetic_records(n, workloads=("short_qa", "chat"), stages=(0, 1)):
        r = dataclasses.replace(r, model=rng.choice(("a", "b")), warmup=rng.random() < 0.1)
        if rng.random() < 0.03:
            r = dataclasses.replace(r, outcome=Outcome.CANCELLED)
        out.append(r)
    return out


def test_counts_are_exact_over_any_split_across_workers():
    spec = parse_goodput("ttft<=300ms,e2e<=3s")
    recs = _records()
    good = [r for r in recs if spec.counted(r) and spec.met(r)]
    judged = [r for r in recs if spec.counted(r)]
    assert 0 < len(good) < len(judged) < len(recs)
    for n_workers in (1, 3, 7):
        master = Aggregate()
        workers = [Aggregate(spec) for _ in range(n_workers)]
        for i, r in enumerate(recs):
            workers[i % n_workers].add(r)
        for w in workers:
            wire = msgpack.unpackb(msgpack.packb(w.take_delta().to_wire()), raw=False)
            master.merge(Aggregate.from_wire(wire))
        total = master.combined()
        assert (total.goodput_met, total.goodput_counted) == (len(good), len(judged))
        for model in ("a", "b"):
            c = master.combined(model=model)
            assert c.goodput_met == sum(r.model == model for r in good)
        for stage in (0, 1):
            c = master.combined(stage=stage, workload="chat")
            assert c.goodput_met == sum(r.stage == stage and r.workload == "chat" for r in good)
    assert workers[0].goodput is spec  # a delta keeps judging after take_delta


def test_summary_metrics_and_the_llm_tab():
    spec = parse_goodput("ttft<=300ms,e2e<=3s")
    recs = _records(1000)
    agg = Aggregate(spec)
    for r in recs:
        agg.add(r)
    s = summary.build(agg, run_id="r", start_s=1_700_000_000.0, end_s=1_700_000_050.0, goodput_slo=spec.text)
    good = sum(spec.counted(r) and spec.met(r) for r in recs)
    judged = sum(spec.counted(r) for r in recs)
    g = s["total"]["goodput"]
    assert (g["slo"], g["met"]) == (spec.text, good) and g["share"] == pytest.approx(good / judged)
    assert g["rate"] == pytest.approx(agg.combined().good_in() / 50.0)
    for block in (s["chat"], s["models"]["a"], *s["classes"]["chat"].values(), s["stages"][0]["total"]):
        assert set(block["goodput"]) == {"slo", "met", "rate", "share"}
    assert "goodput" not in summary.build(agg, run_id="r")["total"]  # without --goodput: absent

    text = render(ExportState(aggregate=agg, run_id="r")).decode()
    met = {
        (dict(s.labels)["workload"], dict(s.labels)["model"]): s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "swarm_goodput_requests"
        for s in fam.samples
        if s.name.endswith("_total")
    }
    assert sum(met.values()) == good
    assert met[("chat", "a")] == agg.combined(workload="chat", model="a").goodput_met

    rows = {r["name"]: r for r in webui.rows(agg, {"good:total": (4.0, 0.0)})}
    assert rows["Total"]["goodput_met"] == good and rows["Total"]["goodput_s"] == 4.0
    assert rows["Total"]["goodput_share"] == round(100 * good / judged, 1)
    assert webui.rows(Aggregate(), {})[0]["goodput_share"] == "-"
