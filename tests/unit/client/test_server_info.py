"""swarm/client/server_info.py: each family's self-description read from its own paths (in the
shapes the simulator's faces answer, swarm/sim/server_info.py), unknown where a server says
nothing, and no secret-named field kept."""

from __future__ import annotations

import orjson
import pytest

from swarm.client.server_info import UNKNOWN, read_target, target_facts
from swarm.sim import ollama, server_info, tgi
from swarm.sim.faces import FACES
from swarm.sim.profile import load_profile


def _getter(face: str, model: str = "m-1"):
    """GETs answered as the simulator's `face` answers them (its /v1/models and its info routes)."""
    profile = load_profile("instant")
    f = FACES[face](profile, [model], None)
    routes = {path: answer()[0] for path, answer in f.extra_gets().items()}
    routes["/v1/models"] = f.models_body(1700000000)
    asked: list[str] = []

    def get(path: str) -> tuple[int, bytes]:
        asked.append(path)
        return (200, routes[path]) if path in routes else (404, b"{}")

    return get, asked, profile


@pytest.mark.parametrize(
    ("face", "version"),
    [
        ("vllm", server_info.VLLM_VERSION),
        ("sglang", server_info.SGLANG_VERSION),
        ("llamacpp", server_info.LLAMACPP_BUILD),
        ("tgi", tgi.VERSION),
        ("trtllm", server_info.TRTLLM_VERSION),
        ("ollama", ollama.VERSION),
    ],
)
def test_each_family_is_read_from_its_own_paths(face, version):
    get, asked, profile = _getter(face)
    family, answers = read_target(get, "")
    facts = target_facts(family, answers)
    assert family == face and facts["family"] == face and facts["version"] == version
    assert facts["model"] == "m-1"
    assert asked[0] == "/v1/models" and len(asked) == 2  # the listing, then the family's one path
    if face in ("vllm", "sglang", "llamacpp", "tgi"):  # those that state the context length
        assert facts["max_model_len"] == profile.max_model_len
    else:
        assert facts["max_model_len"] == UNKNOWN


def test_launch_flags_where_the_server_states_them_and_no_secret():
    get, _, profile = _getter("sglang")
    facts = target_facts(*read_target(get, ""))
    flags = facts["launch_flags"]
    assert flags["max_running_requests"] == profile.max_num_seqs and flags["tp_size"] == 1
    assert "api_key" not in flags and "version" not in flags
    get, _, profile = _getter("llamacpp")
    assert target_facts(*read_target(get, ""))["launch_flags"] == {
        "n_ctx": profile.max_model_len,
        "total_slots": profile.max_num_seqs,
    }
    get, _, _ = _getter("vllm")
    assert target_facts(*read_target(get, ""))["launch_flags"] == UNKNOWN  # vLLM does not expose them


def test_vllm_root_and_the_asked_model():
    get, _, _ = _getter("vllm", "base")
    facts = target_facts(*read_target(get, ""), model="base")
    assert facts["root"] == "base" and facts["sources"] == ["/v1/models", "/version"]


def test_a_server_that_says_nothing_is_unknown_everywhere():
    def dead(path: str) -> tuple[int, bytes]:
        raise OSError("connection refused")

    family, answers = read_target(dead, "/x")
    facts = target_facts(family, answers)
    assert family == UNKNOWN and answers == {}
    assert {k: v for k, v in facts.items() if k != "sources"} == {
        "family": UNKNOWN,
        "version": UNKNOWN,
        "model": UNKNOWN,
        "root": UNKNOWN,
        "max_model_len": UNKNOWN,
        "launch_flags": UNKNOWN,
    }


def test_an_openai_server_without_a_version_path_and_a_dialect_given():
    listing = orjson.dumps({"data": [{"id": "gpt", "owned_by": "openai"}]})
    asked: list[str] = []

    def get(path: str) -> tuple[int, bytes]:
        asked.append(path)
        return (200, listing) if path == "/p/v1/models" else (404, b"")

    facts = target_facts(*read_target(get, "/p"))
    assert facts["family"] == "openai" and facts["version"] == UNKNOWN and facts["model"] == "gpt"
    asked.clear()
    family, _ = read_target(get, "/p", dialect="vllm")  # --dialect decides the family
    assert family == "vllm" and asked == ["/p/v1/models", "/p/version"]


def test_the_target_s_words_are_one_bounded_printable_line():
    body = orjson.dumps({"version": "1.0\x1b[2J" + "x" * 1000, "hf_token": "t"})
    facts = target_facts("vllm", {"/version": orjson.loads(body)})
    assert "\x1b" not in facts["version"] and len(facts["version"]) <= 300
