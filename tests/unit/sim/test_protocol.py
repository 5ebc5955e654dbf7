"""swarm/sim/protocol.py: which served model a request names, and vLLM's 404 for an unknown one."""

from __future__ import annotations

import pytest

from swarm.sim.protocol import ApiError, check_model


def test_a_request_gets_its_model_or_the_first_and_an_unknown_one_is_a_404():
    assert check_model({}, ("base", "a")) == "base" and check_model({"model": "a"}, ("base", "a")) == "a"
    with pytest.raises(ApiError) as e:
        check_model({"model": "x"}, ("base", "a"))
    assert e.value.status == 404 and "Valid aliases: base, a." in e.value.body().decode()
