"""swarm/sim/faces.py: the simulator's server faces are a registry that `swarm sim` and the server read."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from swarm.cli import build_parser
from swarm.cli import main as swarm_main
from swarm.core.errors import UsageError
from swarm.sim.cli import build_config
from swarm.sim.faces import FACES, Face, LlamaCppFace, VllmFace, get_face
from swarm.sim.profile import load_profile
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
