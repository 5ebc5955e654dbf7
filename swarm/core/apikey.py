"""The API key: the origins it is sent to, and its scrub from whatever a target says back.

The one rule, for every request the swarm makes (load, /v1/models discovery, --tokenizer server
calls in the Locust processes; swarm run's model check and /metrics scrapes; swarm tune's runs):

- the key is bound, when it is loaded, to its origins (`scheme://host:port`, `bind_origins`):
  `--api-key-origin` ($SWARM_API_KEY_ORIGIN) if given (one URL or several, comma-separated), else
  each endpoint of the `--host` given at start, else the locustfile's LLM users' one `host`;
- a request carries the key only when its own origin is one of those (`key_for`): a run started
  from the web UI at another host sends no key, and a key with no origin is sent to no one;
- a urllib request that may carry it is built by `BoundKey.request`, the header unredirected: a
  redirect (to any origin) goes without it.

The Locust processes apply it in swarm/live/keyorigin.py, swarm run in swarm/orchestrate/run.py;
both call `bind_origins` and `key_for` here, so the two cannot disagree.

What a target sends back is untrusted: it may repeat the key changed (upper-cased, cut, inside
other text). `scrub` replaces, case-insensitively, every run of at least `SCRUB_MIN_RUN`
characters of the key; it runs on failure messages only, never per chunk.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from swarm.core.errors import UsageError

SCRUB_MIN_RUN = 8
"""The shortest run of the key's characters that is scrubbed (the whole key, if shorter). 8 random
characters of a 32-character key are guessed with odds of 1 in 62^8; shorter runs (a "sk-" prefix,
a common word) would scrub ordinary text."""
MASK = "***"
ORIGIN_ENV = "SWARM_API_KEY_ORIGIN"
"""--api-key-origin's environment variable (read by Locust's parser and by swarm run)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str | None) -> str | None:
    """`url`'s origin, `scheme://host:port` (scheme and host lower-cased, the default port written
    out, credentials and path dropped); None when `url` is not an http(s) URL with a host."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, an unclosed [IPv6
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port if port is not None else _DEFAULT_PORTS[scheme]}"


def origins(urls: str | None) -> str | None:
    """The origins of a comma-separated URL list (one URL too), comma-joined in order without
    repeats; None when there is none or any item is not an http(s) URL."""
    found = [origin(u) for u in (urls or "").split(",")] if urls else []
    if not found or None in found:
        return None
    return ",".join(dict.fromkeys(o for o in found if o))


def bind_origins(given: str | None, hosts: str | None, class_hosts: Iterable[str] = ()) -> str | None:
    """The origins the key is bound to, comma-joined: those of `given` (--api-key-origin) when
    given, else each endpoint of `hosts` (the --host given at start), else the one origin of
    `class_hosts` (the locustfile's users' `host`) when they share one; None: no origin, no key.
    UsageError when `given` is not a list of http(s) URLs."""
    if given:
        bound = origins(given)
        if bound is None:
            raise UsageError(
                f"--api-key-origin {given!r} is not an http(s) URL: use e.g. http://10.0.0.5:8000"
            )
        return bound
    class_origins = {origins(h) for h in class_hosts if h}
    return origins(hosts) or (class_origins.pop() if len(class_origins) == 1 else None)


def key_for(key: str | None, bound: str | None, url: str | None) -> str | None:
    """The key to send to `url`: `key` when `url`'s origin is one of the origins it is `bound` to
    (comma-separated, as `bind_origins` returns them), else None (no origin bound: sent to no one)."""
    if not key or not bound:
        return None
    return key if origin(url) in bound.split(",") else None


@dataclass(frozen=True)
class BoundKey:
    """The API key with the origins it is bound to: what every urllib request that may carry it
    is built from (`request`). The key is left out of the repr."""

    secret: str | None = field(repr=False)
    bound: str | None

    def for_url(self, url: str | None) -> str | None:
        return key_for(self.secret, self.bound, url)

    def request(
        self,
        url: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        method: str | None = None,
    ) -> urllib.request.Request:
        """A urllib request to `url`, with `Authorization: Bearer` only at the key's origins and
        unredirected (urllib copies ordinary headers onto a redirect to any host)."""
        req = urllib.request.Request(url, data, dict(headers or {}), method=method)
        key = self.for_url(url)
        if key:
            req.add_unredirected_header("Authorization", f"Bearer {key}")
        return req


NO_KEY = BoundKey(None, None)


def _fold(text: str) -> str:
    """`text` lower-cased character by character (same length, so indices line up)."""
    if text.isascii():
        return text.lower()
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def scrub(text: str, secret: str | None) -> str:
    """`text` with every run of >= SCRUB_MIN_RUN characters of `secret` (any case) replaced by ***."""
    if not text or not secret:
        return text
    n = min(SCRUB_MIN_RUN, len(secret))
    key = _fold(secret)
    folded = _fold(text)
    if len(folded) < n:
        return text
    if n == len(key):  # a short key: only the whole of it
        spans = [(m.start(), m.end()) for m in re.finditer(re.escape(key), folded)]
    else:
        windows = {key[i : i + n] for i in range(len(key) - n + 1)}
        spans = [(i, i + n) for i in range(len(folded) - n + 1) if folded[i : i + n] in windows]
    if not spans:
        return text
    out, pos = [], 0
    start, end = spans[0]
    for s, e in spans[1:]:
        if s <= end:  # overlapping windows: one run
            end = e
            continue
        out += [text[pos:start], MASK]
        pos, (start, end) = end, (s, e)
    out += [text[pos:start], MASK, text[end:]]
    return "".join(out)
