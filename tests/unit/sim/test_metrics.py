"""swarm/sim/metrics.py: the simulator's vLLM /metrics: buckets, per-model series, when TTFT is observed."""

from __future__ import annotations

import pytest

from swarm.sim.engine import FINISHED, RUNNING, Engine, Sequence
from swarm.sim.metrics import TTFT_BUCKETS, SimMetrics, buckets_1_2_5
from tests.unit.sim.helpers import drain, small_profile


def test_metric_buckets_and_success_only_counts():
    assert buckets_1_2_5(100) == (1, 2, 5, 10, 20, 50, 100)
    eng = Engine(small_profile())
    m = SimMetrics(eng, "m")
    seq = Sequence("a", 10, 2, (), 0.0)
    eng.add(seq)
    drain(eng)
    m.observe_success(seq, "stop")
    text = m.render().decode()
    assert 'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 1.0' in text
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 0.0' in text
    assert 'vllm:generation_tokens_total{engine="0",model_name="m"} 2.0' in text
    les = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("vllm:time_to_first_token_seconds_bucket")
    ]
    assert les == [*(str(float(b)) for b in TTFT_BUCKETS), "+Inf"]


def test_several_models_share_one_engine_and_count_apart():
    eng = Engine(small_profile())
    m = SimMetrics(eng, ("base", "a"))
    seqs = [Sequence(f"s{i}", 10 + i, 2 + i, (), 0.0) for i in range(3)]
    for seq, model in zip(seqs, ("base", "a", "a"), strict=True):
        seq.tally = m.counters(model)
        eng.add(seq)
    drain(eng)
    for seq, model in zip(seqs, ("base", "a", "a"), strict=True):
        m.observe_success(seq, "length", model)
    text = m.render().decode()
    assert 'vllm:prompt_tokens_total{engine="0",model_name="base"} 10.0' in text
    assert 'vllm:prompt_tokens_total{engine="0",model_name="a"} 23.0' in text
    assert 'vllm:generation_tokens_total{engine="0",model_name="a"} 7.0' in text
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="a"} 2.0' in text
    assert eng.counters.prompt_tokens == 33 and eng.counters.generation_tokens == 9  # the engine's sum
    assert 'vllm:num_requests_running{engine="0",model_name="base"}' in text
    assert 'vllm:num_requests_running{engine="0",model_name="a"}' not in text  # one engine: the base's


def test_ttft_histogram_is_observed_when_the_first_token_is_made():
    """vLLM observes time_to_first_token_seconds in the iteration that produces the first token:
    a long answer is in the histogram long before it finishes, and an aborted one stays in it."""
    eng = Engine(small_profile())
    metrics = SimMetrics(eng, "m")
    ttft = metrics.series["m"].ttft
    long_one = Sequence("long", 20, 500, (), 0.0)
    cut_one = Sequence("cut", 20, 500, (), 0.0)
    for s in (long_one, cut_one):
        s.tally = metrics.counters("m")
        eng.add(s)
    t = 0.0
    while long_one.first_token_time is None:
        plan = eng.schedule(t)
        t += eng.step_seconds(plan)
        eng.complete(plan, t)
    assert long_one.state == RUNNING and ttft.count == 2
    assert ttft.sum == pytest.approx(long_one.first_token_time + cut_one.first_token_time)
    eng.abort(cut_one)
    drain(eng, t)
    metrics.observe_success(long_one, "length", "m")
    assert long_one.state == FINISHED and ttft.count == 2  # not observed again at the finish
