"""swarm/client/discovery.py: `--model` checked against the target's /v1/models answer (the
discovery itself needs a server: tests/integration/test_sim_http.py, client/test_transport_fuzz.py)."""

from __future__ import annotations

import pytest

from swarm.client.discovery import require_model_served, require_served
from swarm.core.errors import UsageError


def _models(owner: str, *ids: str) -> dict:
    return {"object": "list", "data": [{"id": i, "object": "model", "owned_by": owner} for i in ids]}


def test_every_wanted_model_must_be_listed_and_the_error_says_what_is_served():
    require_served(_models("vllm", "a", "b"), ["b", "a"], "a:3,b:1")
    with pytest.raises(UsageError) as e:
        require_served(_models("vllm", "a"), ["a", "x", "y"], "a,x,y")
    assert str(e.value) == "--model a,x,y: x, y are not served by the target; it serves: a"
    with pytest.raises(UsageError, match=r"x is not served by the target; it serves: \(no models\)$"):
        require_served({"data": []}, ["x"], "x")


def test_a_plain_model_is_checked_on_vllm_only_a_split_everywhere():
    # vLLM answers a model it does not list with 404: refuse before the run
    with pytest.raises(UsageError):
        require_model_served(_models("vllm", "a"), ["x"], "x", split=False)
    # llama.cpp answers any name with its one model; a proxy may serve names it does not list
    require_model_served(_models("llamacpp", "a"), ["x"], "x", split=False)
    require_model_served(_models("openai", "a"), ["x"], "x", split=False)
    with pytest.raises(UsageError):
        require_model_served(_models("llamacpp", "a"), ["a", "x"], "a,x", split=True)
