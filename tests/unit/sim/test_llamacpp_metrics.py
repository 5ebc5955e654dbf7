"""swarm/sim/llamacpp_metrics.py: llama-server's `llamacpp:` families, as `--metrics` writes them."""

from __future__ import annotations

import pytest

from swarm.sim.engine import Engine, Sequence
from swarm.sim.llamacpp_metrics import LlamaMetrics
from tests.unit.sim.helpers import drain, small_profile


def _samples(text: str) -> dict[str, float]:
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if not line.startswith("#")}


def test_families_follow_the_engine_and_the_finished_requests():
    eng = Engine(small_profile())
    m = LlamaMetrics(eng)
    seq = Sequence("a", 20, 5)
    eng.add(seq)
    drain(eng)
    m.observe_success(seq, "length")
    text = m.render().decode()
    assert text.endswith("\n")
    assert "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed" in text
    assert "# TYPE llamacpp:requests_deferred gauge" in text and "_bucket" not in text
    s = _samples(text)
    assert s["llamacpp:tokens_predicted_total"] == eng.counters.generation_tokens
    assert s["llamacpp:n_tokens_max"] == 25
    assert s["llamacpp:n_decode_total"] == eng.counters.steps > 0
    assert s["llamacpp:prompt_seconds_total"] == pytest.approx(seq.first_token_time - seq.scheduled_time)
    assert s["llamacpp:requests_processing"] == 0 and s["llamacpp:spec_decode_num_drafts_total"] == 0
    assert m.counters("m") is None  # one model: no per-model tally


def test_an_idle_server_writes_zero_rates():
    s = _samples(LlamaMetrics(Engine(small_profile())).render().decode())
    assert s["llamacpp:prompt_tokens_seconds"] == 0 and s["llamacpp:n_busy_slots_per_decode"] == 0
