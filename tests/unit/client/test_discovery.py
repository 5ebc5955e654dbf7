"""swarm/client/discovery.py: `--model` checked against the target's /v1/models answer (the
discovery itself needs a server: tests/integration/test_sim_http.py, client/test_transport_fuzz.py)."""

from __future__ import annotations

import logging

import orjson
import pytest

from swarm.client.discovery import discover, require_model_served, require_served
from swarm.core.errors import UsageError
from swarm.core.terminal import SHOWN_MAX


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


HOSTILE = "m\r\n2026-01-01 00:00:00 swarm: forged line\x1b[2J" + "x" * 500


def test_the_model_a_target_names_is_logged_as_one_bounded_line(caplog):
    """A served model id (or an error body) with a CR LF would forge a log line (issue 41)."""
    body = orjson.dumps(_models("vllm", HOSTILE))
    caplog.set_level(logging.INFO, logger="swarm.client.discovery")
    served = discover(lambda path: (200, body), "", None, "auto", False)
    assert served.model == HOSTILE  # sent as the target named it
    err = orjson.dumps({"error": {"message": HOSTILE}})
    discover(lambda path: (500, err), "", "m", "auto", False)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(line.isprintable() and len(line) < 2 * SHOWN_MAX for line in lines)
    assert all("m\\x0d\\x0a2026-01-01 00:00:00 swarm: forged line\\x1b[2J" in line for line in lines)
