"""What the target says about itself: family, version, model, context length, launch flags.

Read once at a test's start by the master for summary.json's provenance (swarm/live/provenance.py),
never on the request path. `/v1/models` first (the family from its `owned_by`, as the dialect is
detected: swarm/client/dialects.py), then the family's own paths, each where the family has one:

| family | path | what it states |
|---|---|---|
| vLLM | `/version`, `/v1/models` | `version`; the model's `root`, `max_model_len` |
| SGLang | `/get_server_info`, `/v1/models` | `version`, its `ServerArgs` (the launch flags) |
| llama.cpp | `/props` | `build_info`, `model_path`, `default_generation_settings.n_ctx`, `total_slots` |
| TGI | `/info` | `version`, `model_id`, `max_total_tokens`, the router's limits (launch flags) |
| TensorRT-LLM | `/version` | `version` |
| Ollama | `/api/version` | `version` |

`read_target` does the GETs (each bounded by the getter's short timeout; a path that fails is
left out); `target_facts` (pure) turns the answers into the block. What a server does not say is
`UNKNOWN`, never guessed. The answers are the target's words: each string is cut to one printable
line, and a field whose name says it is a secret (`api_key`, a token, a password) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from swarm.client.dialects import detect_dialect, first_model, max_model_len
from swarm.core.terminal import shown

UNKNOWN = "unknown"
MODELS = "/v1/models"
INFO_PATHS: dict[str, tuple[str, ...]] = {
    "vllm": ("/version",),
    "sglang": ("/get_server_info",),
    "llamacpp": ("/props",),
    "tgi": ("/info",),
    "trtllm": ("/version",),
    "ollama": ("/api/version",),
    "openai": (),
}
TGI_FLAGS = (
    "max_concurrent_requests",
    "max_best_of",
    "max_stop_sequences",
    "max_input_tokens",
    "max_total_tokens",
    "validation_workers",
    "max_client_batch_size",
)
SECRET_NAME = re.compile(r"key|token|secret|passw|auth|cred", re.IGNORECASE)
VALUE_MAX = 300  # characters of one value the target states

Getter = Callable[[str], tuple[int, bytes]]


def read_target(get: Getter, prefix: str, dialect: str = "auto") -> tuple[str, dict[str, Any]]:
    """(the family, {path: its JSON answer}) of the target at `prefix`; `dialect`: --dialect (a name
    decides the family; "auto": /v1/models' `owned_by`). Never raises: what does not answer is absent."""
    answers: dict[str, Any] = {}
    _read(get, prefix + MODELS, MODELS, answers)
    family = dialect if dialect in INFO_PATHS else detect_dialect(answers.get(MODELS))
    if family == "openai" and MODELS not in answers:
        family = UNKNOWN
    for path in INFO_PATHS.get(family, ()):
        _read(get, prefix + path, path, answers)
    return family, answers


def _read(get: Getter, url_path: str, key: str, into: dict[str, Any]) -> None:
    try:
        status, body = get(url_path)
        if status == 200:
            into[key] = orjson.loads(body)
    except Exception:  # a server that does not answer, or answers no JSON: it said nothing
        return


def target_facts(family: str, answers: Mapping[str, Any], model: str | None = None) -> dict[str, Any]:
    """The provenance's target block from `read_target`'s answers (pure). `model`: the model the run
    asks for (--model), else /v1/models' first."""
    models = answers.get(MODELS)
    model = model or first_model(models)
    card = _card(models, model)
    facts: dict[str, Any] = {
        "family": family,
        "version": UNKNOWN,
        "model": model or UNKNOWN,
        "root": card.get("root") or UNKNOWN,
        "max_model_len": max_model_len(models, model) or UNKNOWN,
        "launch_flags": UNKNOWN,
    }
    paths = INFO_PATHS.get(family) or ("",)
    info = answers.get(paths[0])
    if isinstance(info, dict):
        _FAMILY_FACTS.get(family, _version_only)(info, facts)
    facts["sources"] = sorted(answers)
    return {k: _clean(v) for k, v in facts.items()}


def _card(models: Any, model: str | None) -> dict[str, Any]:
    try:
        return next(m for m in models["data"] if isinstance(m, dict) and m.get("id") == model)
    except (KeyError, TypeError, StopIteration):
        return {}


def _version_only(info: dict[str, Any], facts: dict[str, Any]) -> None:
    if info.get("version"):
        facts["version"] = info["version"]


def _sglang(info: dict[str, Any], facts: dict[str, Any]) -> None:
    _version_only(info, facts)
    if facts["model"] == UNKNOWN and (info.get("served_model_name") or info.get("model_path")):
        facts["model"] = info.get("served_model_name") or info["model_path"]
    if facts["root"] == UNKNOWN and info.get("model_path"):
        facts["root"] = info["model_path"]
    if facts["max_model_len"] == UNKNOWN and isinstance(info.get("context_length"), int):
        facts["max_model_len"] = info["context_length"]
    flags = {k: v for k, v in info.items() if k != "version" and _scalar(v)}
    facts["launch_flags"] = flags or UNKNOWN  # ServerArgs as the server resolved them


def _llamacpp(info: dict[str, Any], facts: dict[str, Any]) -> None:
    if info.get("build_info"):
        facts["version"] = info["build_info"]
    if info.get("model_path"):
        facts["root"] = info["model_path"]
    settings = info.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(n_ctx, int):
        facts["max_model_len"] = n_ctx
    flags = {"n_ctx": n_ctx, "total_slots": info.get("total_slots")}
    flags = {k: v for k, v in flags.items() if isinstance(v, int)}
    facts["launch_flags"] = flags or UNKNOWN


def _tgi(info: dict[str, Any], facts: dict[str, Any]) -> None:
    _version_only(info, facts)
    if info.get("model_id"):
        facts["root"] = info["model_id"]
    if isinstance(info.get("max_total_tokens"), int):
        facts["max_model_len"] = info["max_total_tokens"]
    flags = {k: info[k] for k in TGI_FLAGS if _scalar(info.get(k)) and info.get(k) is not None}
    facts["launch_flags"] = flags or UNKNOWN


_FAMILY_FACTS: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "sglang": _sglang,
    "llamacpp": _llamacpp,
    "tgi": _tgi,
}


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _clean(v: Any) -> Any:
    """A value the target stated, as the provenance keeps it: strings one printable bounded line,
    dicts without secret-named fields, nothing but JSON scalars, lists and dicts."""
    if isinstance(v, str):
        return shown(v, VALUE_MAX)
    if isinstance(v, bool) or v is None or isinstance(v, (int, float)):
        return v
    if isinstance(v, dict):
        return {shown(str(k), VALUE_MAX): _clean(x) for k, x in v.items() if not SECRET_NAME.search(str(k))}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return shown(str(v), VALUE_MAX)
