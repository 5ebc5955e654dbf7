"""swarm/tune/twin/profile.py: a fitted twin written as a profile TOML and read back."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.tune.twin.profile import read_twin
from tests.unit.tune.twin.helpers import write_known


def test_a_twin_round_trips_with_every_parameters_evidence(tmp_path):
    twin = read_twin(write_known(tmp_path / "twin.toml"))
    p = twin.profile
    assert (p.step.base_s, p.step.decode_token_s, p.max_num_seqs, p.kv_cache_tokens) == (0.01, 0.001, 8, 4000)
    assert (p.seq_state_tokens, p.prefix_caching, p.max_model_len) == (0, False, 200)
    assert p.output_tokens.components[0].value == 20
    assert twin.running_reached == 8.0 and twin.run == "run-dir"
    assert twin.params["step.base_s"].evidence == "ITL at 0 running"
    text = (tmp_path / "twin.toml").read_text()
    assert "# fitted: ITL at 0 running (R^2 1.000)\nbase_s = 0.01" in text


def test_a_refused_parameter_stays_out_of_the_profile(tmp_path):
    twin = read_twin(write_known(tmp_path / "twin.toml", kv=None))
    assert twin.params["engine.kv_cache_tokens"].value is None
    assert twin.params["engine.kv_cache_tokens"].status == "refused"
    assert "kv_cache_tokens =" not in (tmp_path / "twin.toml").read_text().split("[twin]")[0]


def test_a_foreign_file_is_one_line(tmp_path):
    (tmp_path / "plain.toml").write_text('name = "x"\n')
    with pytest.raises(UsageError, match="not a twin profile"):
        read_twin(tmp_path / "plain.toml")
    with pytest.raises(UsageError, match="cannot read"):
        read_twin(tmp_path / "missing.toml")
