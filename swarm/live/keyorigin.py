"""The API key in a Locust process: bound at start to one origin, sent to that origin only.

Locust's web UI lets whoever reaches it start a run at any host (the start form's `host`, and
any other option: `POST /swarm` writes every form field into the parsed options). Without this
module a key loaded from $OPENAI_API_KEY went to whatever host was typed there. So:

- at `init` the key is bound to an origin (`scheme://host:port`, swarm/core/apikey.py):
  `--api-key-origin` / $SWARM_API_KEY_ORIGIN if given, else the `--host` given at start (flag,
  $LOCUST_HOST, config file), else the locustfile's LLM users' `host` when they share one. With
  several endpoints (`--host URL1,URL2`) it is bound to each origin given there at start (each is a
  target the user named), and `--api-key-origin` may name several too (URL1,URL2): an endpoint
  outside them gets no key. The bound origins travel as one comma-separated text. A
  worker without one of its own takes its master's (the master sends its bound origin with the
  options of every spawn message, and the web UI cannot change it: see `refuse_key_fields`);
- every request, discovery and tokenizer call gets the key only when its origin is that one
  (`key_for`); otherwise it goes without, and the log says so once per host;
- with no origin bound the key is sent to no one, and a warning says how to give one;
- the web UI binds to 127.0.0.1 unless `--web-host` says otherwise (swarm/live/options.py), and a
  loud warning names the exposure when a key is loaded and the UI listens beyond loopback without
  `--web-login`.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from locust.runners import WorkerRunner

from swarm.core.apikey import bind_origins, origin, origins
from swarm.core.apikey import key_for as _key_for
from swarm.live.state import swarm_state

log = logging.getLogger(__name__)

KEY_FIELDS = ("api_key", "api_key_origin")  # options the web UI's start form may never set
_said: set[str] = set()


def bind(environment: Any, web_ui: Any = None, class_hosts: tuple[str, ...] = ()) -> None:
    """At `init`: the origin the key is bound to (on `environment.swarm.key_origin`), the web UI's
    guard and the warnings. `class_hosts`: the locustfile's LLM users' `host` attributes.
    UsageError for an --api-key-origin that is not an http(s) URL."""
    opts = getattr(environment, "parsed_options", None)
    state = swarm_state(environment)
    given = getattr(opts, "api_key_origin", None) or None
    bound = bind_origins(given, getattr(environment, "host", None), class_hosts)  # the rule: core/apikey.py
    state.key_origin = bound
    worker = isinstance(getattr(environment, "runner", None), WorkerRunner)
    if opts is not None and not worker:
        opts.api_key_origin = bound  # what the workers get with every spawn message
    if web_ui is not None:
        refuse_key_fields(web_ui)
    if not getattr(opts, "api_key", None) or worker:
        return
    if bound is None:
        log.warning(
            "swarm: an API key is loaded but no --host was given at start: it is sent to no one. "
            "Give --host (or SWARM_API_KEY_ORIGIN) for the server the key belongs to"
        )
    if web_ui is not None and not getattr(opts, "web_login", False) and not _loopback(opts.web_host):
        log.warning(
            "swarm: WARNING: the web UI listens on %s:%s without --web-login while an API key is loaded: "
            "anyone who reaches it can start and stop runs (the key itself goes only to %s). "
            "Add --web-login, or leave --web-host at 127.0.0.1",
            opts.web_host or "*",
            opts.web_port,
            bound or "no one",
        )


def key_for(environment: Any, url: str | None) -> str | None:
    """The API key to send to `url`, or None: no key, or `url` is not at the origin it is bound to
    (said once per origin in the log)."""
    state = swarm_state(environment)
    key = state.llm_options(environment).api_key
    if not key:
        return None
    bound = state.key_origin
    if bound is None and isinstance(getattr(environment, "runner", None), WorkerRunner):
        bound = origins(getattr(environment.parsed_options, "api_key_origin", None))  # the master's
    sent = _key_for(key, bound, url)
    if sent is None:
        where = origin(url) or str(url)
        if where not in _said:
            _said.add(where)
            if bound:
                log.warning(
                    "swarm: key not sent: host %s is not the origin it was given for (%s)", where, bound
                )
            else:
                log.warning(
                    "swarm: key not sent to %s: it was given no origin (--host or SWARM_API_KEY_ORIGIN at start)",
                    where,
                )
    return sent


def refuse_key_fields(web_ui: Any) -> None:
    """The web UI's start form may not set the key or its origin (Locust copies every form field
    into the parsed options, which the master sends to its workers): 403."""
    from flask import jsonify, request

    def guard() -> Any:
        if request.method == "POST" and request.endpoint == "locust.swarm":
            fields = sorted(set(request.form) & set(KEY_FIELDS))
            if fields:
                message = f"{', '.join(fields)} cannot be set from the web UI: they are given at start"
                log.warning("swarm: web UI start refused: %s", message)
                return jsonify({"success": False, "message": message}), 403
        return None

    web_ui.app.before_request(guard)


def _loopback(web_host: str | None) -> bool:
    host = (web_host or "").strip("[]")
    if host in ("", "*"):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: assume reachable
        return False
