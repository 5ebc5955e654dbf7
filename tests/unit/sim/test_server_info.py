"""swarm/sim/server_info.py: each face answers its family's version path in its family's shape,
and only its own family's (a face that answered another's would pass for the wrong server)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from swarm.sim import ollama, server_info, tgi
from swarm.sim.profile import load_profile
from swarm.sim.server import SimConfig, SimServer

PATHS = ("/version", "/props", "/get_server_info", "/info", "/api/version")


def _answers(face: str) -> dict[str, tuple[int, object]]:
    profile = load_profile("instant")
    server = SimServer(SimConfig(profile=profile, server=face, model="m-1"))

    async def ask() -> dict[str, tuple[int, object]]:
        out: dict[str, tuple[int, object]] = {}
        async with TestServer(server.app()) as ts, ClientSession() as http:
            for path in PATHS:
                async with http.get(ts.make_url(path)) as r:
                    body = await r.read()
                    ok = r.status == 200 and r.content_type == "application/json"
                    out[path] = (r.status, orjson.loads(body) if ok else None)
        return out

    try:
        return asyncio.run(ask())
    finally:
        server.close()


@pytest.mark.parametrize(
    ("face", "path", "version_key", "version"),
    [
        ("vllm", "/version", "version", server_info.VLLM_VERSION),
        ("trtllm", "/version", "version", server_info.TRTLLM_VERSION),
        ("llamacpp", "/props", "build_info", server_info.LLAMACPP_BUILD),
        ("sglang", "/get_server_info", "version", server_info.SGLANG_VERSION),
        ("tgi", "/info", "version", tgi.VERSION),
        ("ollama", "/api/version", "version", ollama.VERSION),
    ],
)
def test_each_face_states_its_version_at_its_family_s_path_only(face, path, version_key, version):
    answers = _answers(face)
    status, body = answers[path]
    assert status == 200 and isinstance(body, dict) and body[version_key] == version
    others = [p for p in PATHS if p != path and answers[p][0] == 200 and answers[p][1] is not None]
    assert others == [], f"{face} answers {others} too"


def test_the_settings_the_families_state_are_the_profile_s():
    p = load_profile("instant")
    props = _answers("llamacpp")["/props"][1]
    assert props["default_generation_settings"]["n_ctx"] == p.max_model_len  # type: ignore[index]
    assert props["total_slots"] == p.max_num_seqs and props["model_path"] == "m-1"  # type: ignore[index]
    info = _answers("sglang")["/get_server_info"][1]
    assert info["context_length"] == p.max_model_len and info["served_model_name"] == "m-1"  # type: ignore[index]
    assert info["max_running_requests"] == p.max_num_seqs  # type: ignore[index]
    tgi_info = _answers("tgi")["/info"][1]
    assert tgi_info["model_id"] == "m-1" and tgi_info["max_total_tokens"] == p.max_model_len  # type: ignore[index]
