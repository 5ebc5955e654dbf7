"""swarm/tune/twin/predict.py: flags and assumptions on a twin's profile, the search on the virtual
clock, the bottleneck it reads, and the notes (assumptions, extrapolation) a prediction carries."""

from __future__ import annotations

import dataclasses
import random

import pytest

from swarm.core.errors import UsageError
from swarm.load.workloads import workload_draw
from swarm.sim.calibrate import LevelResult
from swarm.tune.twin.predict import (
    SCALE_SAMPLES,
    bottleneck,
    configure_profile,
    flag_overrides,
    parse_assumptions,
    predict,
    prompt_scale,
    scaled_draw,
    search_users,
)
from swarm.tune.twin.profile import read_twin
from tests.unit.tune.twin.helpers import write_known


@pytest.fixture
def twin(tmp_path):
    return read_twin(write_known(tmp_path / "twin.toml"))


def level(users: int, ttft: float, running: float = 1.0, kv: float = 0.1, preempt: int = 0) -> LevelResult:
    return LevelResult(users, 10.0, running, kv, kv, preempt, 20.0, ttft_p99=ttft)


def test_flags_map_as_the_simulators_and_an_unmapped_one_is_refused(twin):
    p = twin.profile
    assert flag_overrides({"--max-num-seqs": "32", "--kv-cache-dtype": "fp8"}, p) == {
        "max_num_seqs": 32,
        "kv_cache_tokens": 8000,  # fp8: half the bytes, twice the tokens
    }
    assert flag_overrides({"-np": "4", "--no-enable-prefix-caching": ""}, p) == {
        "max_num_seqs": 4,
        "prefix_caching": False,
    }
    with pytest.raises(UsageError, match="--gpu-memory-utilization: the twin maps no such flag"):
        flag_overrides({"--gpu-memory-utilization": "0.95"}, p)
    with pytest.raises(UsageError, match="not an integer"):
        flag_overrides({"--max-num-seqs": "many"}, p)


def test_assumptions_scale_or_set_a_field(twin):
    a = parse_assumptions(["decode_cost*0.6", "kv_cache_tokens=9000"])
    p = configure_profile(twin, {}, a)
    assert p.step.decode_token_s == pytest.approx(0.0006) and p.kv_cache_tokens == 9000
    assert p.step.base_s == 0.01  # untouched
    for bad in ("speed*2", "decode_cost*x", "decode_cost*-1", "decode_cost"):
        with pytest.raises(UsageError, match="--assume"):
            parse_assumptions([bad])


def test_a_refused_parameter_must_be_given(tmp_path):
    no_cap = read_twin(write_known(tmp_path / "a.toml", cap=None))
    with pytest.raises(UsageError, match=r"refused max_num_seqs .* --grid max-num-seqs=N"):
        configure_profile(no_cap, {}, [])
    assert configure_profile(no_cap, {"--max-num-seqs": "16"}, []).max_num_seqs == 16
    no_kv = read_twin(write_known(tmp_path / "b.toml", kv=None))
    with pytest.raises(
        UsageError, match=r'refused kv_cache_tokens .*no KV-usage gauge.*--assume "kv_cache_tokens=N"'
    ):
        configure_profile(no_kv, {}, [])
    assert configure_profile(no_kv, {}, parse_assumptions(["kv_cache_tokens=5000"])).kv_cache_tokens == 5000


def test_the_search_finds_the_last_users_meeting_the_limit():
    answer, failing, seen = search_users(lambda u: level(u, 0.1 if u <= 37 else 2.0), 0.5)
    assert (answer, failing) == (37, 38)
    assert len(seen) < 15  # doubling then bisection, not every level
    assert search_users(lambda u: level(u, 2.0), 0.5)[:2] == (None, 1)


def test_the_bottleneck_is_read_from_the_twins_engine(twin):
    p = twin.profile  # cap 8
    assert bottleneck(level(20, 1.0, running=7.9), p)[0] == "max_num_seqs_cap"
    assert bottleneck(level(20, 1.0, running=6, kv=0.99), p)[0] == "kv_bound"
    assert bottleneck(level(20, 1.0, running=5, preempt=3), p)[0] == "kv_bound"
    kind, why = bottleneck(level(6, 1.0, running=5), p)
    assert kind == "compute_bound" and "under the cap (8)" in why


def test_a_prediction_on_the_virtual_clock_with_its_notes(twin):
    draw = workload_draw("short_qa")
    a = parse_assumptions(["decode_cost*0.5"])
    got = predict(twin, "max-num-seqs=32", {"--max-num-seqs": "32"}, a, draw, limit_s=0.5)
    c = got.config
    assert c.status == "ok" and c.answer is not None and c.bracket == (c.answer, c.answer + 1)
    assert c.points and all(
        pt.met_slo == (pt.ttft_p99_s is not None and pt.ttft_p99_s <= 0.5) for pt in c.points
    )
    assert got.notes[0] == "assumes decode_cost*0.5"
    assert any(n.startswith("extrapolated: up to") and "reached 8" in n for n in got.notes)
    at_cap = predict(twin, "max-num-seqs=8", {"--max-num-seqs": "8"}, [], draw, limit_s=0.5)
    assert at_cap.notes == [] and at_cap.config.bottleneck == "max_num_seqs_cap"


def test_an_fp8_cache_is_predicted_with_its_assumption_stated(twin):
    got = predict(
        twin, "fp8", {"--max-num-seqs": "8", "--kv-cache-dtype": "fp8"}, [], workload_draw("short_qa"), 0.5
    )
    assert got.notes == [
        "--kv-cache-dtype fp8 taken to halve every KV byte (an upper bound where a hybrid model keeps its "
        "linear-attention state in its own dtype)"
    ]


def test_prompts_are_stretched_to_the_servers_count_keeping_shared_prefixes():
    """The prefill cost was fitted per server token (its chat template and tokenizer); the twin draws
    words: the drawn prompts are scaled to the fitted run's mean count, prefixes kept shared."""
    draw = workload_draw("short_qa")
    rng = random.Random(0)
    words = sum(len(draw(rng)[0]) for _ in range(SCALE_SAMPLES)) / SCALE_SAMPLES
    scale = prompt_scale(2.5 * words, ("short_qa",))
    assert scale == pytest.approx(2.5)
    assert prompt_scale(words * 1.01, ("short_qa",)) is None  # within 2%: as drawn
    assert prompt_scale(None, ("short_qa",)) is None and prompt_scale(30.0, ()) is None
    stretched = scaled_draw(lambda _rng: (["a", "b", "c", "d"], 7), 2.5)
    got, max_tokens = stretched(rng)
    assert max_tokens == 7 and len(got) == 10
    assert got[:3] == ["a~0", "a~1", "a~2"] and got[-1] == "d~9"
    other, _ = scaled_draw(lambda _rng: (["a", "b", "x", "y"], 7), 2.5)(rng)
    assert other[:5] == got[:5] and other[5] != got[5]  # the shared two words: five shared tokens


def test_a_twin_fitted_on_longer_prompts_predicts_with_them_and_says_so(twin):
    counted = dataclasses.replace(twin, prompt_tokens=40.0, workloads=("short_qa",))
    got = predict(counted, "max-num-seqs=8", {"--max-num-seqs": "8"}, [], workload_draw("short_qa"), 0.5)
    assert any(n.startswith("prompts scaled to the server's count") and "short_qa" in n for n in got.notes)
