"""swarm/sim/cli.py: the served model names `swarm sim --model` accepts."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.sim.cli import served_models


def test_served_models_split_commas_and_refuse_empty_or_repeated_names():
    assert served_models(None) == ("sim-model",)
    assert served_models(["base", "a,b"]) == ("base", "a", "b")
    for bad in (["a,,b"], ["a", "a"], [""]):
        with pytest.raises(UsageError):
            served_models(bad)
