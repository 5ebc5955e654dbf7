"""URLs the user gives (--host, --server-metrics, --gpu-metrics, --grafana-url): checked once, here.

`check_url` accepts what every later reader (urllib, geventhttpclient, the pollers) can use: an
http(s) scheme, a host, a port in 1-65535 when one is given. Anything else, `http://[::1` and
`http://h:99999` included (urllib raises ValueError on both only when it is first used), is a
UsageError naming the option, before anything starts. `check_host` also refuses a target URL
ending in /v1, which the swarm adds itself. `split_hosts` reads a comma-separated --host (several
endpoints in one run) and `endpoint_label` names an endpoint everywhere without its credentials.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from swarm.core.errors import UsageError

_SHAPE = re.compile(r"^https?://[^\s/]+")


def check_url(url: str | None, option: str, example: str = "http://127.0.0.1:8000") -> str:
    """`url` if usable, else UsageError "OPTION 'url' is not a URL: use e.g. EXAMPLE" (with why)."""
    text = url or ""
    why = ""
    if _SHAPE.match(text):
        try:
            parts = urlsplit(text)
            port = parts.port  # ValueError when out of 0-65535 or not a number
            if not parts.hostname:
                why = "no host"
            elif port == 0:
                why = "port 0"
        except ValueError as e:
            why = str(e)
        if not why:
            return text
    detail = f" ({why})" if why else ""
    raise UsageError(f"{option} {url!r} is not a URL{detail}: use e.g. {example}")


def check_host(url: str | None, option: str = "--host") -> str:
    """A target's base URL: `check_url`, and not ending in /v1 (OpenAI clients' habit): the swarm adds
    /v1/chat/completions and /v1/models itself, and .../v1/v1/models answers 404 to every request."""
    text = check_url(url, option)
    if urlsplit(text).path.rstrip("/").endswith("/v1"):
        base = text.rstrip("/")[: -len("/v1")]
        raise UsageError(f"{option} {url!r}: give the server's base URL without /v1, e.g. {base}")
    return text


def split_hosts(value: str | None, option: str = "--host") -> tuple[str, ...]:
    """A comma-separated --host value as its endpoints' base URLs, in the order given.

    Each item is checked as `check_host` checks one and loses its trailing '/'. An empty item
    (`a,,b`, a trailing comma) or two items naming one endpoint (the same `endpoint_label`, so two
    credentials for one server too) are a UsageError naming the option. One URL gives one endpoint.
    """
    items = (value or "").split(",")
    if any(not item.strip() for item in items):
        raise UsageError(
            f"{option} {value!r}: an empty URL in the list; give URL1,URL2,... with no empty item"
        )
    urls: list[str] = []
    seen: set[str] = set()
    for item in items:
        url = check_host(item.strip(), option).rstrip("/")
        label = endpoint_label(url)
        if label in seen:
            raise UsageError(f"{option} {value!r}: {label} is given twice; give each endpoint once")
        seen.add(label)
        urls.append(url)
    return tuple(urls)


def endpoint_label(url: str) -> str:
    """The name of an endpoint shown everywhere (records, tables, summary, /metrics, report): its URL
    without credentials (`user:pass@`) and without a trailing '/'; query and fragment dropped."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")
