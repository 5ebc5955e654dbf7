"""swarm/sim/profile.py: bundled and user profiles, overrides, output-length draws."""

from __future__ import annotations

import random

import pytest

from swarm.core.errors import UsageError
from swarm.sim.profile import LengthComponent, LengthDist, load_profile, parse_profile


def test_bundled_profiles_load_and_overrides_apply():
    inst = load_profile("instant")
    assert inst.step.instant
    rtx = load_profile("rtx5090x4-qwen3.6-27b")
    assert rtx.max_num_seqs == 256 and rtx.max_model_len == 16384 and not rtx.step.instant
    p = rtx.with_overrides(max_num_seqs=8, prefix_caching=False, utf8_split=None)
    assert (p.max_num_seqs, p.prefix_caching, p.utf8_split) == (8, False, rtx.utf8_split)


def test_user_profile_file_and_errors(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[engine]\nmax_num_seqs = 3\n[lengths]\noutput = { dist = "const", value = 7 }\n')
    p = load_profile(str(f))
    assert p.name == "mine" and p.max_num_seqs == 3
    assert p.draw_output(random.Random(0), 100, thinking=False) == (7, 0, "stop")
    assert p.draw_output(random.Random(0), 5, thinking=False) == (5, 0, "length")
    assert p.draw_output(random.Random(0), 100, thinking=False, min_tokens=20) == (20, 0, "stop")
    assert p.draw_output(random.Random(0), 100, thinking=False, ignore_eos=True) == (100, 0, "length")
    with pytest.raises(UsageError, match="unknown profile"):
        load_profile("no-such-profile")
    f.write_text("[engine]\nmax_num_sequences = 3\n")
    with pytest.raises(UsageError, match="unknown key"):
        load_profile(str(f))
    with pytest.raises(UsageError, match="kv_cache_tokens"):
        parse_profile({"engine": {"kv_cache_tokens": 100, "max_model_len": 4096}}, "tiny")


def test_thinking_lengths_come_first_and_are_cut_by_max_tokens():
    p = load_profile("instant")
    rng = random.Random(1)
    for _ in range(50):
        total, reasoning, finish = p.draw_output(rng, 4000, thinking=True)
        assert 1800 <= reasoning <= 2300 and total > reasoning and finish == "stop"
    total, reasoning, finish = p.draw_output(rng, 1000, thinking=True)
    assert (total, reasoning, finish) == (1000, 1000, "length")


def test_length_mixture_gives_both_stop_and_length():
    dist = LengthDist(
        (
            LengthComponent(weight=1, dist="uniform", low=10, high=30),
            LengthComponent(weight=1, dist="lognormal", median=300, sigma=0.5, min=51),
        )
    )
    rng = random.Random(0)
    caps = [min(50, dist.sample(rng)) for _ in range(2000)]
    assert 0.4 < sum(c == 50 for c in caps) / len(caps) < 0.6


def test_a_memory_table_gives_kv_cache_tokens_and_excludes_a_given_one():
    memory = {"gpu_memory_gib": 24, "weights_gib": 8, "kv_layers": 32, "kv_heads": 8, "head_dim": 128}
    p = parse_profile({"memory": memory, "engine": {"max_model_len": 4096}}, "m")
    # 0.9 x 24 - 8 = 13.6 GiB over 128 KiB a token
    assert p.memory is not None and p.kv_cache_tokens == int(13.6 * 8192)
    with pytest.raises(UsageError, match="not both"):
        parse_profile({"memory": memory, "engine": {"kv_cache_tokens": 100000}}, "m")
