"""What the master serves: /metrics (on the web UI and on --prometheus-port) and the LLM tab.

The LLM tab (swarm/live/webui) gets its table rows and its chart series through callables, so
this module knows nothing of how the master keeps them; `--web-login` is made usable here too
(swarm/live/webauth.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from swarm.core.errors import UsageError
from swarm.live import webui
from swarm.live.exporter import CONTENT_TYPE

logger = logging.getLogger(__name__)


def install_web_ui(
    web_ui: Any,
    registry: CollectorRegistry,
    rows: Callable[[], list[dict[str, Any]]],
    series: Callable[[], dict[str, Any]],
) -> None:
    """/metrics on the web UI, the login (with --web-login), the LLM tab's rows and charts."""
    from flask import Response
    from prometheus_client import generate_latest

    def metrics() -> Response:
        return Response(generate_latest(registry), mimetype=None, content_type=CONTENT_TYPE)

    web_ui.app.add_url_rule("/metrics", "swarm_metrics", metrics)
    if getattr(web_ui, "web_login", False):  # Locust's --web-login, made usable (swarm/live/webauth.py)
        from swarm.live import webauth

        webauth.install(web_ui)
    webui.install(web_ui, rows)
    webui.install_charts(web_ui, series)


def start_prometheus_server(port: int, registry: CollectorRegistry, host: str = "") -> None:
    """/metrics on its own port, on `host` ("": every interface); a busy port is a usage error
    (exit 2), not another server's numbers."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=host or "0.0.0.0", registry=registry)
    except OSError as e:  # a busy port: whoever reads it would read another server's numbers
        raise UsageError(
            f"--prometheus-port {port}: cannot serve /metrics there ({e.strerror or e}): give a free port"
        ) from None
    logger.info("swarm: serving /metrics on %s:%d", host or "*", port)
