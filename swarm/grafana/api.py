"""Grafana's HTTP API through grafana-client: `swarm grafana push` and run annotations.

- `swarm grafana push --url URL` creates (or updates) the Prometheus datasource and imports the
  four dashboards of swarm/grafana/dashboards.py into an existing Grafana.
- `Annotator` posts organisation-wide annotations (run start, each stage, run end) tagged
  `llm-swarm` and `run_id:<id>`; every dashboard shows annotations with the `llm-swarm` tag.
  Annotations are a side show: a Grafana that is down, slow or refuses the token gives ONE
  warning line on stderr and the Annotator turns itself off; the run goes on.

The token comes from $GRAFANA_TOKEN (a service-account token, sent as `Authorization: Bearer`),
never from the command line, and never appears in any message.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from swarm.core import urls
from swarm.core.apikey import scrub
from swarm.core.errors import SwarmError, UsageError
from swarm.core.terminal import printable
from swarm.core.units import stage_name
from swarm.grafana.dashboards import build_all
from swarm.grafana.names import ANNOTATION_TAG, DATASOURCE_NAME, DATASOURCE_UID, TOKEN_ENV, URL_ENV

TIMEOUT_S = 3.0  # per API call; annotations must never hold a run up for long
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"


def safe_url(url: str) -> str:
    """The URL without user:password and query (both may carry secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def check_url(url: str, option: str = "--url") -> str:
    """`url` without its trailing slash; UsageError when it is not one (http://[::1, a bad port)."""
    return urls.check_url(url, option, "http://localhost:3000").rstrip("/")


def api_client(url: str, token: str | None, timeout_s: float = TIMEOUT_S):
    """A grafana_client.GrafanaApi for `url` with a Bearer token (or user:password in the URL)."""
    from grafana_client import GrafanaApi

    return GrafanaApi.from_url(url, credential=token or None, timeout=timeout_s)


def describe(exc: BaseException, token: str | None = None, timeout_s: float = TIMEOUT_S) -> str:
    """One short reason for a failed API call, with the token (if any) scrubbed out."""
    from grafana_client.client import (
        GrafanaClientError,
        GrafanaException,
        GrafanaServerError,
        GrafanaTimeoutError,
        GrafanaUnauthorizedError,
    )
    from niquests.exceptions import RequestException

    if isinstance(exc, GrafanaUnauthorizedError):
        text = f"401 Unauthorized: the token was refused (set ${TOKEN_ENV} to a valid service-account token)"
    elif isinstance(exc, GrafanaTimeoutError):
        text = f"no answer within {timeout_s:g}s"
    elif isinstance(exc, GrafanaClientError) and exc.status_code == 403:
        text = "403 Forbidden: the token lacks the permission (needs Editor, or Admin for datasources)"
    elif isinstance(exc, GrafanaClientError | GrafanaServerError):
        text = f"HTTP {exc.status_code}: {_message(exc.response)}"
    elif isinstance(exc, GrafanaException | RequestException):  # transport: refused, DNS, TLS
        text = f"not reachable ({_root_cause(exc)})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    # Grafana's words: the token scrubbed in any case or part (a cut at 300 characters included),
    # control characters written out (swarm/core/apikey.py, terminal.py)
    return printable(scrub(" ".join(str(text).split())[:300], token))


def _message(response: Any) -> str:
    if isinstance(response, dict):
        return str(response.get("message") or response)
    return str(response)


def _root_cause(exc: BaseException) -> str:
    """`Connection refused`, `Name or service not known`...: the OS reason somewhere in the chain."""
    chain: list[BaseException] = [exc]
    while len(chain) < 20 and (chain[-1].__cause__ or chain[-1].__context__) is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)  # type: ignore[arg-type]
    for e in chain:
        m = re.search(r"\[Errno -?\d+\] ([^)'\"\]]+)", str(e))
        if m:
            return m.group(1).strip()
    if "NameResolutionError" in str(exc) or any(type(e).__name__ == "gaierror" for e in chain):
        return "cannot resolve the host name"
    return type(chain[-1]).__name__


# ----------------------------------------------------------------------------- annotations


class Annotator:
    """Posts run/stage annotations; after the first failure, one warning line and then nothing.

    Call `Annotator.from_env(url)` (None when url is empty): the token is read from $GRAFANA_TOKEN.
    Each method returns the new annotation's id, or None when it was not posted.
    """

    def __init__(
        self,
        api: Any,
        url: str,
        token: str | None = None,
        timeout_s: float = TIMEOUT_S,
        stream: IO[str] | None = None,
    ) -> None:
        self._api = api
        self._token = token
        self._timeout_s = timeout_s
        self._stream = stream
        self.url = safe_url(url)
        self.enabled = True
        self.posted = 0

    @classmethod
    def from_env(
        cls,
        url: str | None,
        token: str | None = None,
        timeout_s: float = TIMEOUT_S,
        stream: IO[str] | None = None,
    ) -> Annotator | None:
        if not url:
            return None
        url = check_url(url, "--grafana-url")
        token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        return cls(api_client(url, token, timeout_s), url, token, timeout_s, stream)

    def annotate(self, text: str, tags: list[str], time_s: float | None = None) -> int | None:
        """One point annotation at `time_s` (default now), tagged `llm-swarm` + `tags`."""
        if not self.enabled:
            return None
        when_ms = int((time.time() if time_s is None else time_s) * 1000)
        try:
            answer = self._api.annotations.add_annotation(
                time_from=when_ms, tags=[ANNOTATION_TAG, *tags], text=text
            )
        except Exception as e:  # any failure: warn once, stop trying, never break the run
            self.enabled = False
            reason = describe(e, self._token, self._timeout_s)
            print(
                f"swarm: warning: Grafana annotations off ({self.url}): {reason}",
                file=self._stream or sys.stderr,
                flush=True,
            )
            return None
        self.posted += 1
        return answer.get("id") if isinstance(answer, dict) else None

    def run_started(self, run_id: str, detail: str = "", time_s: float | None = None) -> int | None:
        text = f"swarm run {run_id} started" + (f": {detail}" if detail else "")
        return self.annotate(text, [f"run_id:{run_id}", "run-start"], time_s)

    def stage_started(
        self, run_id: str, stage_index: int, label: str = "", time_s: float | None = None
    ) -> int | None:
        text = f"swarm run {run_id}: {stage_name(stage_index)}" + (f" ({label})" if label else "")
        return self.annotate(text, [f"run_id:{run_id}", "stage", f"stage:{stage_index}"], time_s)

    def run_finished(self, run_id: str, detail: str = "", time_s: float | None = None) -> int | None:
        text = f"swarm run {run_id} finished" + (f": {detail}" if detail else "")
        return self.annotate(text, [f"run_id:{run_id}", "run-end"], time_s)


# ----------------------------------------------------------------------------- push


def datasource_model(prometheus_url: str) -> dict[str, Any]:
    """The Prometheus datasource every dashboard refers to (same uid as the provisioning file)."""
    return {
        "name": DATASOURCE_NAME,
        "uid": DATASOURCE_UID,
        "type": "prometheus",
        "access": "proxy",
        "url": prometheus_url,
        "isDefault": False,
        "jsonData": {"timeInterval": "5s", "httpMethod": "POST"},
    }


def push(
    url: str,
    token: str | None,
    prometheus_url: str,
    folder_uid: str | None = None,
    timeout_s: float = 10.0,
    log: IO[str] | None = None,
) -> list[dict[str, Any]]:
    """Create/update the datasource, import every dashboard (overwrite). Raises SwarmError."""
    from grafana_client.client import GrafanaClientError, GrafanaException
    from niquests.exceptions import RequestException  # grafana-client lets connection errors through

    out = log or sys.stdout
    api = api_client(url, token, timeout_s)
    where = safe_url(url)
    results: list[dict[str, Any]] = []
    ds = datasource_model(prometheus_url)
    try:
        try:
            answer = api.datasource.create_datasource(ds)
            action = "created"
        except GrafanaClientError as e:
            if e.status_code != 409:  # 409: a datasource with this name or uid exists already
                raise
            answer = api.datasource.update_datasource_by_uid(DATASOURCE_UID, ds)
            action = "updated"
        results.append(answer)
        print(
            f"swarm grafana: datasource {ds['name']!r} (uid {DATASOURCE_UID}) -> {prometheus_url}: {action}",
            file=out,
        )
        for name, model in build_all().items():
            model = {k: v for k, v in model.items() if k not in ("id", "version")}
            payload: dict[str, Any] = {"dashboard": model, "overwrite": True, "message": "swarm grafana push"}
            if folder_uid:
                payload["folderUid"] = folder_uid
            answer = api.dashboard.update_dashboard(payload)
            results.append(answer)
            print(
                f"swarm grafana: dashboard {model['title']!r} ({name}) -> {where}{answer.get('url', '')} "
                f"version {answer.get('version')}",
                file=out,
            )
    except (GrafanaException, RequestException) as e:
        raise SwarmError(f"Grafana at {where}: {describe(e, token, timeout_s)}") from None
    return results


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    push_p = sub.add_parser(
        "push",
        help="upload the datasource and the dashboards to an existing Grafana",
        description=f"Token from ${TOKEN_ENV} (Bearer); never on the command line.",
    )
    push_p.add_argument(
        "--url",
        default=os.environ.get(URL_ENV),
        help=f"Grafana base URL, e.g. http://localhost:3000 (default: ${URL_ENV})",
    )
    push_p.add_argument(
        "--prometheus-url",
        default=os.environ.get("PROMETHEUS_URL", DEFAULT_PROMETHEUS_URL),
        help="Prometheus URL as Grafana's server reaches it "
        f"(default: $PROMETHEUS_URL or {DEFAULT_PROMETHEUS_URL})",
    )
    push_p.add_argument(
        "--folder-uid", default=None, help="folder to import the dashboards into (default: General)"
    )
    push_p.add_argument("--timeout", type=float, default=10.0, help="seconds per API call (default 10)")


def main(args: argparse.Namespace) -> int:
    if not args.url:
        raise UsageError(f"--url is required (or set ${URL_ENV})")
    url = check_url(args.url)
    check_url(args.prometheus_url, "--prometheus-url")
    push(url, os.environ.get(TOKEN_ENV) or None, args.prometheus_url, args.folder_uid, args.timeout)
    return 0
