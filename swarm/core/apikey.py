"""The API key: the one origin it is sent to, and its scrub from whatever a target says back.

The key is bound to an origin (`scheme://host:port`) when it is loaded: `--api-key-origin`
($SWARM_API_KEY_ORIGIN) if given, else the `--host` given at start (swarm/live/keyorigin.py).
A request carries the key only when its own origin is that one (`key_for`): a run started from
the web UI at another host sends no key, and a key with no origin is sent to no one.

What a target sends back is untrusted: it may repeat the key changed (upper-cased, cut, inside
other text). `scrub` replaces, case-insensitively, every run of at least `SCRUB_MIN_RUN`
characters of the key; it runs on failure messages only, never per chunk.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

SCRUB_MIN_RUN = 8
"""The shortest run of the key's characters that is scrubbed (the whole key, if shorter). 8 random
characters of a 32-character key are guessed with odds of 1 in 62^8; shorter runs (a "sk-" prefix,
a common word) would scrub ordinary text."""
MASK = "***"
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


def key_for(key: str | None, bound: str | None, url: str | None) -> str | None:
    """The key to send to `url`: `key` when `url`'s origin is the origin it is `bound` to, else None
    (no origin bound: sent to no one)."""
    if not key or bound is None:
        return None
    return key if origin(url) == bound else None


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
