"""swarm/sim/faces.py: the simulator's server faces are a registry that `swarm sim` and the server read."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from swarm.cli import build_parser
from swarm.cli import main as swarm_main
from swarm.core.errors import UsageError
from swarm.sim.cli import build_config
from swarm.sim.faces import FACES, Face, LlamaCppFace, VllmFace, get_face
from swarm.sim.profile import load_profile
from swarm.sim.protocol import ApiError
from swarm.sim.server import SimConfig, SimServer


def test_the_registry_lists_every_family_by_name():
    assert list(FACES) == ["vllm", "llamacpp", "sglang", "tgi", "trtllm", "ollama"]
    assert FACES["vllm"] is VllmFace and FACES["llamacpp"] is LlamaCppFace
    for name, face in FACES.items():
        assert issubclass(face, Face) and face.name == name and get_face(name) is face


class _OtherFace(VllmFace):
    """One more server family: a registry entry, nothing else to change."""

    name = "other"
    health = {"text": "other server", "content_type": "text/plain"}  # noqa: RUF012
    one_model = "its one model"

    def not_found(self, path: str) -> tuple[bytes, int]:
        return b'{"missing":true}', 404


def test_the_server_answers_as_its_face_says(monkeypatch):
    monkeypatch.setitem(FACES, "other", _OtherFace)
    server = SimServer(SimConfig(profile=load_profile("instant"), server="other"))
    assert isinstance(server.face, _OtherFace)

    async def ask() -> tuple[str, int, bytes]:
        async with TestServer(server.app()) as ts, ClientSession() as http:
            async with http.get(ts.make_url("/health")) as r:
                health = await r.text()
            async with http.get(ts.make_url("/v1/nope")) as r:
                return health, r.status, await r.read()

    try:
        assert asyncio.run(ask()) == ("other server", 404, b'{"missing":true}')
    finally:
        server.close()


def test_an_unknown_face_is_one_line_and_exit_2(capsys):
    assert swarm_main(["sim", "--server", "bogus", "--port", "0"]) == 2
    assert (
        capsys.readouterr().err
        == "swarm sim: error: unknown server 'bogus'; choose one of vllm, llamacpp, sglang, tgi, trtllm, ollama\n"
    )


def test_swarm_sim_help_names_every_face(capsys):
    with pytest.raises(SystemExit):
        swarm_main(["sim", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name in FACES:
        assert f"{name} (" in help_text


def test_swarm_sim_takes_a_registered_face_and_its_one_model_rule(monkeypatch):
    monkeypatch.setitem(FACES, "other", _OtherFace)
    assert build_config(build_parser().parse_args(["sim", "--server", "other"])).server == "other"
    with pytest.raises(
        UsageError, match=r"--server other serves one model \(its one model\); give one --model"
    ):
        build_config(build_parser().parse_args(["sim", "--server", "other", "--model", "a,b"]))


def test_reset_prefix_cache_is_vllm_s_endpoint_and_llama_server_has_none():
    async def reset(server: SimServer) -> tuple[int, bytes]:
        async with (
            TestServer(server.app()) as ts,
            ClientSession() as http,
            http.post(ts.make_url("/reset_prefix_cache")) as r,
        ):
            return r.status, await r.read()

    vllm = SimServer(SimConfig(profile=load_profile("instant")))
    vllm.engine.pool.refs[123] = 0  # one cached block no request holds
    vllm.engine.pool.evictable[123] = None
    llama = SimServer(SimConfig(profile=load_profile("instant"), server="llamacpp"))
    try:
        assert asyncio.run(reset(vllm)) == (200, b"") and not vllm.engine.pool.refs
        status, _ = asyncio.run(reset(llama))
        assert status == 404
    finally:
        vllm.close()
        llama.close()


# ---- the families of issue 29: what each face answers where its source says ------------------------
CHAT = {
    "model": "sim-model",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 3,
    "stream": True,
}
# face -> (health path, its body, metrics path, GET /metrics status, empty-messages error status and body)
FAMILIES = {
    # sglang protocol.py ErrorResponse: top-level {"object": "error", "message", "type", "param", "code"}
    "sglang": ("/health", "", "/metrics", 200, 400, {"object", "message", "type", "param", "code"}),
    # TGI server.rs: /health empty 200, ErrorResponse {"error": str, "error_type"}, validation 422
    "tgi": ("/ping", "", "/metrics", 200, 422, {"error", "error_type"}),
    # trtllm openai_server.py: Prometheus at /prometheus/metrics, /metrics the iteration stats (JSON)
    "trtllm": (
        "/health",
        "",
        "/prometheus/metrics",
        200,
        400,
        {"object", "message", "type", "param", "code"},
    ),
    # ollama routes.go: GET / "Ollama is running", no /metrics; openai.go NewError {"error": {...}}
    "ollama": ("/", "Ollama is running", None, 404, 400, {"error"}),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_family_answers_health_metrics_and_errors_where_its_source_says(name):
    health_path, health_body, metrics_path, metrics_status, err_status, err_keys = FAMILIES[name]
    server = SimServer(SimConfig(profile=load_profile("instant"), server=name))

    async def ask() -> dict:
        got = {}
        async with TestServer(server.app()) as ts, ClientSession() as http:
            async with http.get(ts.make_url(health_path)) as r:
                got["health"] = (r.status, await r.text())
            async with http.get(ts.make_url("/metrics")) as r:
                got["metrics"] = r.status
            if metrics_path is not None:
                async with http.get(ts.make_url(metrics_path)) as r:
                    got["prometheus"] = (await r.read()).decode()
            async with http.post(ts.make_url("/v1/chat/completions"), json={**CHAT, "messages": []}) as r:
                got["error"] = (r.status, await r.json())
        return got

    try:
        got = asyncio.run(ask())
    finally:
        server.close()
    assert got["health"] == (200, health_body)
    assert got["metrics"] == metrics_status
    if metrics_path is not None:
        families = list(text_string_to_metric_families(got["prometheus"]))
        assert families and all(
            f.name.startswith(f"{name}_") or f.name.startswith(f"{name}:") for f in families
        )
    status, body = got["error"]
    assert status == err_status and set(body) == err_keys


@pytest.mark.parametrize(
    ("opts", "include", "continuous"),
    [
        (None, True, False),
        ({"include_usage": False}, False, False),
        ({"continuous_usage_stats": True}, True, True),
    ],
)
def test_trtllm_streams_usage_unless_told_not_to(opts, include, continuous):
    """openai_protocol.py StreamOptions: include_usage defaults to true, continuous_usage_stats to false."""
    face = FACES["trtllm"](load_profile("instant"), ["sim-model"], None)
    body = CHAT if opts is None else {**CHAT, "stream_options": opts}
    _, _, req = face.parse(json.dumps(body).encode(), "chat")
    assert (req.include_usage, req.continuous_usage) == (include, continuous)
    with pytest.raises(ApiError) as e:  # a body that does not fit the schema: {"error": "<text>"}, 400
        face.parse(b'{"messages": 3}', "chat")
    assert e.value.status == 400 and list(json.loads(e.value.body())) == ["error"]


@pytest.mark.parametrize(
    ("name", "owned_by"),
    [("sglang", "sglang"), ("tgi", "sim-model"), ("trtllm", "tensorrt_llm"), ("ollama", "library")],
)
def test_each_family_names_itself_in_the_model_listing(name, owned_by):
    """How the client tells them apart: sglang ModelCard, TGI's model id, trtllm ModelCard, Ollama's namespace."""
    face = FACES[name](load_profile("instant"), ["sim-model"], None)
    (card,) = json.loads(face.models_body(1))["data"]
    assert card["owned_by"] == owned_by and card["id"] == "sim-model"
    assert "max_model_len" in card if name == "sglang" else "max_model_len" not in card


def test_an_injected_fault_is_said_in_the_family_s_words():
    bodies = {
        name: json.loads(
            FACES[name](load_profile("instant"), ["sim-model"], None).error(429, "busy", "x").body()
        )
        for name in ("sglang", "trtllm", "ollama")
    }
    assert (
        bodies["sglang"]
        == bodies["trtllm"]
        == {"object": "error", "message": "busy", "type": "x", "param": None, "code": 429}
    )
    assert bodies["ollama"] == {
        "error": {"message": "busy", "type": "api_error", "param": None, "code": None}
    }
    tgi_server = SimServer(SimConfig(profile=load_profile("instant"), server="tgi"))
    try:
        assert tgi_server.face.error(429, "busy", "x").body() == b'{"error":"busy","error_type":"overloaded"}'
        assert 'tgi_request_failure{err="overloaded"} 1' in tgi_server.metrics.render().decode()
    finally:
        tgi_server.close()
