"""Which model to ask for and which dialect the server speaks: from the options, else /v1/models.

One `ServedModel` per process (the users share it); when /v1/models does not answer, the
options' model and the openai dialect are used and the question is asked again after
`DISCOVERY_RETRY_S`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from swarm.client.dialects import Dialect, detect_dialect, error_message, first_model, get_dialect
from swarm.client.transport import json_or_text

log = logging.getLogger(__name__)

DISCOVERY_RETRY_S = 5.0


@dataclass
class ServedModel:
    model: str | None
    dialect: Dialect
    discovered: bool  # False: /v1/models has not answered (yet); asked again at retry_at
    retry_at: float = 0.0

    def fresh(self) -> bool:
        return self.discovered or time.monotonic() < self.retry_at


def discover(
    get: Callable[[str], tuple[int, bytes]], prefix: str, model: str | None, dialect: str, ignore_eos: bool
) -> ServedModel:
    """`get(path) -> (status, body)`: a GET on the target. `dialect`: a name or "auto"."""
    if model and dialect != "auto":
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
            e,
            model or "(none)",
            fallback,
            DISCOVERY_RETRY_S,
        )
        return ServedModel(model, get_dialect(fallback), False, time.monotonic() + DISCOVERY_RETRY_S)
    name = dialect if dialect != "auto" else detect_dialect(models)
    chosen = model or first_model(models)
    if ignore_eos and name == "openai":
        log.warning("--ignore-eos: the target looks like a plain OpenAI server; sending ignore_eos anyway")
    log.info("target: model %s, dialect %s", chosen, name)
    return ServedModel(chosen, get_dialect(name), True)
