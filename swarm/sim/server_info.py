"""What each simulated server says about itself, at the paths and in the shapes the real ones use.

The swarm reads these once at a test's start for summary.json's provenance
(swarm/client/server_info.py), so each face answers its family's own path with its family's shape:

- vLLM: `GET /version` -> `{"version": ...}` (`vllm/entrypoints/openai/api_server.py`, `show_version`);
  its model, `root` and `max_model_len` are in /v1/models.
- llama.cpp: `GET /props` (`tools/server/server.cpp`, `handle_props`): `default_generation_settings`
  (with `n_ctx`), `total_slots` (`-np`), `model_path`, `chat_template`, `build_info` (`b<N>-<commit>`),
  among others.
- SGLang: `GET /get_server_info` (`python/sglang/srt/entrypoints/http_server.py`): the server's
  `ServerArgs` as a dict (its launch flags, `model_path`, `served_model_name`, `context_length`,
  `max_running_requests`, ...), the scheduler's figures and `version`. A subset is answered here.
- TGI: `GET /info` (`Info` in `router/src/lib.rs`; swarm/sim/tgi.py `info_body`).
- TensorRT-LLM: `GET /version` -> `{"version": ...}` (`openai_server.py`).
- Ollama: `GET /api/version` -> `{"version": ...}`.

The vLLM, SGLang and TensorRT-LLM versions are the simulator's own labels (`+sim`), llama.cpp's
`build_info` that of a build without a number (`b0-unknown`), so a run against the simulator does
not pass for one against the real server (TGI's and Ollama's faces keep the versions their shapes
were read from: swarm/sim/tgi.py, ollama.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from swarm.sim import llamacpp, ollama, tgi

VLLM_VERSION = "0.32.0+sim"
SGLANG_VERSION = "0.5.4+sim"
TRTLLM_VERSION = "1.1.0+sim"
LLAMACPP_BUILD = llamacpp.FINGERPRINT  # build_info: what a llama-server built from the PyPI sdist reports

Route = Callable[[], tuple[bytes, str]]


def llamacpp_props(model: str, n_ctx: int, slots: int) -> dict[str, Any]:
    """llama-server's `GET /props` (the fields the swarm reads, and a few beside them)."""
    return {
        "default_generation_settings": {
            "id": 0,
            "n_ctx": n_ctx,
            "speculative": False,
            "is_processing": False,
        },
        "total_slots": slots,
        "model_alias": model,
        "model_path": model,
        "modalities": {"vision": False, "audio": False},
        "endpoint_slots": True,
        "endpoint_props": False,
        "endpoint_metrics": True,
        "chat_template": "",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "build_info": LLAMACPP_BUILD,
    }


def sglang_server_info(model: str, context_length: int, max_running: int) -> dict[str, Any]:
    """SGLang's `GET /get_server_info`: `ServerArgs` (a subset), the scheduler's figures, `version`."""
    return {
        "model_path": model,
        "tokenizer_path": model,
        "served_model_name": model,
        "context_length": context_length,
        "max_running_requests": max_running,
        "tp_size": 1,
        "dp_size": 1,
        "mem_fraction_static": 0.88,
        "chunked_prefill_size": 8192,
        "disable_radix_cache": False,
        "enable_metrics": True,
        "api_key": None,  # ServerArgs carries the server's key too (None: none was set)
        "max_total_num_tokens": context_length * max_running,
        "max_req_input_len": context_length - 1,
        "version": SGLANG_VERSION,
    }


def routes(family: str, model: str, max_model_len: int, max_num_seqs: int) -> dict[str, Route]:
    """The GET routes by which `family`'s face states its version and settings: path -> (body, type)."""

    def answer(body: dict[str, Any]) -> Route:
        data = orjson.dumps(body)
        return lambda: (data, "application/json")

    if family in ("vllm", "trtllm"):
        return {"/version": answer({"version": VLLM_VERSION if family == "vllm" else TRTLLM_VERSION})}
    if family == "llamacpp":
        return {"/props": answer(llamacpp_props(model, max_model_len, max_num_seqs))}
    if family == "sglang":
        return {"/get_server_info": answer(sglang_server_info(model, max_model_len, max_num_seqs))}
    if family == "tgi":
        return {"/info": answer(tgi.info_body(model, max_num_seqs, max_model_len))}
    if family == "ollama":
        return {"/api/version": answer({"version": ollama.VERSION})}
    return {}
