"""Emptying a server's prefix cache between runs or stages, where the server offers that.

vLLM serves `POST /reset_prefix_cache` (with VLLM_SERVER_DEV_MODE=1; the simulator's vLLM face
too); llama-server and the others answer 404. Used by `swarm tune` between configurations'
runs (swarm/tune/run.py) and by the load shape before each stage with --reset-prefix-cache
(swarm/live/shape.py): here, below both, so neither copies it.
"""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request

from swarm.core.apikey import NO_KEY, BoundKey

RESET_PATH = "/reset_prefix_cache"


def reset_prefix_cache(url: str, timeout_s: float = 10.0, key: BoundKey = NO_KEY) -> bool:
    """POST url/reset_prefix_cache, best effort: True when the server emptied its prefix cache,
    False when it does not offer that (404) or failed. `url`: the server's base URL (no /v1);
    `key`: the API key, sent only where it is bound (swarm/core/apikey.py)."""
    req = key.request(url.rstrip("/") + RESET_PATH, data=b"", method="POST")
    with (
        contextlib.suppress(urllib.error.URLError, OSError, ValueError),
        urllib.request.urlopen(req, timeout=timeout_s) as r,
    ):
        return 200 <= r.status < 300
    return False


__all__ = ["RESET_PATH", "reset_prefix_cache"]
