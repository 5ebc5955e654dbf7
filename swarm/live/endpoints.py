"""One endpoint of the run as a user sends to it (`--host URL1,URL2,...`: one each).

`make_endpoint` builds, for one base URL: its label (swarm/core/urls.py `endpoint_label`, the name
records, tables and /metrics show), its path prefix, the request head, and a `Transport` on the
process's connection pool for that origin (swarm/client/shared_pool.py: one per origin, shared by
the users). The Authorization header is the API key when swarm/live/keyorigin.py `key_for` allows
it at that origin (with several endpoints each is allowed or refused on its own: the key never goes
to an origin it is not bound to), else the URL's own `user:password@` as Basic, else none.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from swarm.client.dialects import ENDPOINTS
from swarm.client.request_ids import HEADER
from swarm.client.shared_pool import origin_pool
from swarm.client.transport import Transport
from swarm.core.urls import endpoint_label
from swarm.live.keyorigin import key_for
from swarm.live.options import LLMOptions

REQUEST_ID = HEADER  # the last header of every request head: the swarm's id follows (request_ids.py)
CONTENT_LENGTH = b"Content-Length: "  # the last header of every request (its value follows)
LENGTH = b"\r\n" + CONTENT_LENGTH  # ends the X-Request-Id line, opens the Content-Length one


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint: its label, path prefix, request URL (for Locust's request event) and transport."""

    label: str
    prefix: str  # the base URL's path, without a trailing '/' or /v1
    url: str  # the request URL, without credentials
    transport: Transport


def basic_auth(netloc: str) -> str | None:
    """A URL's `user:password@` as a Basic Authorization value (as Locust reads --host's), else None."""
    userinfo, at, _ = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not at or not colon or not user or not password:
        return None
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return f"Basic {token}"


def make_endpoint(environment: Any, client: Any, opts: LLMOptions, host: str) -> Endpoint:
    """The endpoint at base URL `host` for a user whose Locust client is `client` (FastHttpSession)."""
    parts = urlsplit(host)
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    host_header = parts.netloc.rpartition("@")[2]
    pool = origin_pool(client, f"{parts.scheme}://{host_header}/")  # the process's, shared by its users
    key = key_for(environment, host)  # None at an origin other than the key's
    basic = basic_auth(parts.netloc)
    auth = f"Authorization: Bearer {key}\r\n" if key else f"Authorization: {basic}\r\n" if basic else ""
    common_headers = f"Host: {host_header}\r\nUser-Agent: llm-swarm\r\n{auth}"
    path = prefix + ENDPOINTS[opts.endpoint]
    head = (
        f"POST {path} HTTP/1.1\r\n{common_headers}Accept: text/event-stream\r\n"
        "Content-Type: application/json\r\n"
    ).encode("latin-1") + REQUEST_ID  # the request's own id, then Content-Length, follow per request
    transport = Transport(pool, head, common_headers, opts.request_timeout, opts.request_deadline or None)
    return Endpoint(endpoint_label(host), prefix, f"{parts.scheme}://{host_header}{path}", transport)
