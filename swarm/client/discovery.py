"""Which model to ask for and which dialect the server speaks: from the options, else /v1/models.

One `ServedModel` per process (the users share it); when /v1/models does not answer, the
options' model and the openai dialect are used and the question is asked again after
`DISCOVERY_RETRY_S`. With a split (`--model a:3,b:1`) every model of it must be listed there:
`require_served` says in one line which are not, and what the target serves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from swarm.client.dialects import (
    Dialect,
    detect_dialect,
    error_message,
    first_model,
    get_dialect,
    max_model_len,
    model_ids,
)
from swarm.client.transport import json_or_text
from swarm.core.errors import UsageError
from swarm.core.terminal import shown

log = logging.getLogger(__name__)

DISCOVERY_RETRY_S = 5.0


@dataclass
class ServedModel:
    model: str | None
    dialect: Dialect
    discovered: bool  # False: /v1/models has not answered (yet); asked again at retry_at
    retry_at: float = 0.0
    max_model_len: int | None = None  # the context length /v1/models gives (vLLM), else None

    def fresh(self) -> bool:
        return self.discovered or time.monotonic() < self.retry_at


def require_served(models: Any, wanted: Sequence[str], spec: str) -> None:
    """UsageError (one line) unless the `/v1/models` answer `models` lists every name in `wanted`."""
    served = model_ids(models)
    missing = [m for m in wanted if m not in served]
    if missing:
        raise UsageError(
            f"--model {spec}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not served by the "
            f"target; it serves: {', '.join(shown(str(m)) for m in served) or '(no models)'}"
        )


def require_model_served(models: Any, names: Sequence[str], spec: str, split: bool) -> None:
    """`--model` against the `/v1/models` answer `models`: every model of a split must be listed;
    one plain model too when the target is vLLM, which answers a model it does not list with 404
    (llama.cpp answers any name with its one model, and OpenAI-compatible proxies may serve
    names they do not list: those are left to the requests)."""
    if split or detect_dialect(models) == "vllm":
        require_served(models, names, spec)


def discover(
    get: Callable[[str], tuple[int, bytes]],
    prefix: str,
    model: str | None,
    dialect: str,
    ignore_eos: bool,
    split: Sequence[str] = (),
    spec: str = "",
) -> ServedModel:
    """`get(path) -> (status, body)`: a GET on the target. `dialect`: a name or "auto". `split`: the
    models of `--model a:3,b:1` (`spec`), each of which must be served (UsageError otherwise)."""
    if model and dialect != "auto" and not split:
        return ServedModel(model, get_dialect(dialect), True)
    try:
        status, body = get(prefix + "/v1/models")
        if status != 200:
            raise OSError(f"HTTP {status}: {error_message(json_or_text(body))}")
        models = orjson.loads(body)
    except Exception as e:  # no model list: go on with what the options say
        fallback = "openai" if dialect == "auto" else dialect
        log.warning(
            "GET /v1/models failed (%s: %s); using --model %s and the %s dialect; retrying in %.0f s",
            type(e).__name__,
            shown(str(e)),  # it may quote the target's error body
            shown(model or "(none)"),
            fallback,
            DISCOVERY_RETRY_S,
        )
        return ServedModel(model, get_dialect(fallback), False, time.monotonic() + DISCOVERY_RETRY_S)
    if split:
        require_served(models, split, spec)
    name = dialect if dialect != "auto" else detect_dialect(models)
    chosen = model or first_model(models)
    if ignore_eos and name == "openai":
        log.warning("--ignore-eos: the target looks like a plain OpenAI server; sending ignore_eos anyway")
    log.info("target: model %s, dialect %s", shown(str(chosen)), name)  # the target's words: one line
    return ServedModel(chosen, get_dialect(name), True, max_model_len=max_model_len(models, chosen))
