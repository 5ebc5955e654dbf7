"""A small HTTP stand-in for the few Grafana HTTP API endpoints the swarm uses.

No Grafana server can run here, so tests talk to this instead. It follows Grafana's documented
request/response shapes (grafana.com/docs/grafana/latest/developers/http_api/):

- auth: `Authorization: Bearer <token>` (service-account token) or Basic user:password;
  anything else -> 401 {"message": "Unauthorized"}. GET /api/health needs no auth.
- POST /api/dashboards/db {dashboard, folderUid?, message?, overwrite?}
  -> 200 {id, uid, url, status: "success", version, slug}; 400 without a title;
  412 {message, status: "name-exists"} when the uid exists and overwrite is false.
- POST /api/datasources {name, type, access, url, uid?, ...}
  -> 200 {datasource, id, message: "Datasource added", name}; 409 when name or uid exists.
- GET/PUT /api/datasources/uid/:uid -> the datasource / {datasource, id, message: "Datasource updated", name};
  404 {"message": "Data source not found"}.
- POST /api/annotations {dashboardUID?, panelId?, time?, timeEnd?, tags?, text}
  -> 200 {message: "Annotation added", id}; 400 {"message": "Text field should not be empty"}.
- GET /api/annotations?tags=T&limit=N -> list of annotations carrying every tag T.

Every request is recorded (`StandIn.requests`) so a test can check exactly what was sent.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class StandIn:
    url: str
    token: str
    basic: tuple[str, str] | None = None
    delay_s: float = 0.0  # answer every request this late (a slow Grafana)
    requests: list[Recorded] = field(default_factory=list)
    dashboards: dict[str, dict] = field(
        default_factory=dict
    )  # uid -> {"dashboard", "version", "id", "folderUid"}
    datasources: dict[str, dict] = field(default_factory=dict)  # uid -> datasource
    annotations: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1

    def new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


class _Handler(BaseHTTPRequestHandler):
    state: StandIn  # set on the subclass

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing
    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if auth == f"Bearer {self.state.token}":
            return True
        if self.state.basic and auth.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                return False
            return (user, password) == self.state.basic
        return False

    def _handle(self, method: str) -> None:
        st = self.state
        if st.delay_s:
            time.sleep(st.delay_s)
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with st.lock:
            st.requests.append(Recorded(method, parts.path, dict(self.headers.items()), body))
        if parts.path == "/api/health" and method == "GET":
            return self._send(200, {"commit": "standin", "database": "ok", "version": "11.4.0"})
        if not self._authorized():
            return self._send(401, {"message": "Unauthorized"})
        if raw and not isinstance(body, dict | list):
            return self._send(400, {"message": "bad request data"})
        route = (method, parts.path)
        with st.lock:
            if route == ("POST", "/api/dashboards/db"):
                return self._dashboard_db(body or {})
            if route == ("POST", "/api/datasources"):
                return self._datasource_create(body or {})
            m = re.fullmatch(r"/api/datasources/uid/([^/]+)", parts.path)
            if m and method == "GET":
                ds = st.datasources.get(m.group(1))
                return self._send(200, ds) if ds else self._send(404, {"message": "Data source not found"})
            if m and method == "PUT":
                return self._datasource_update(m.group(1), body or {})
            if route == ("POST", "/api/annotations"):
                return self._annotation_create(body or {})
            if route == ("GET", "/api/annotations"):
                q = parse_qs(parts.query)
                tags = set(q.get("tags", []))
                limit = int(q.get("limit", ["100"])[0])
                found = [a for a in st.annotations if tags <= set(a["tags"])]
                return self._send(200, found[:limit])
        return self._send(404, {"message": "Not found"})

    # -- endpoints
    def _dashboard_db(self, body: dict) -> None:
        st = self.state
        dash = body.get("dashboard")
        if not isinstance(dash, dict) or not dash.get("title"):
            return self._send(400, {"message": "Dashboard title cannot be empty"})
        uid = dash.get("uid") or f"u{st.new_id()}"
        old = st.dashboards.get(uid)
        if old and not body.get("overwrite"):
            return self._send(
                412, {"message": "A dashboard with the same uid already exists", "status": "name-exists"}
            )
        version = old["version"] + 1 if old else 1
        did = old["id"] if old else st.new_id()
        st.dashboards[uid] = {
            "dashboard": dash,
            "version": version,
            "id": did,
            "folderUid": body.get("folderUid"),
        }
        slug = _slug(dash["title"])
        return self._send(
            200,
            {
                "id": did,
                "uid": uid,
                "url": f"/d/{uid}/{slug}",
                "status": "success",
                "version": version,
                "slug": slug,
            },
        )

    def _datasource_create(self, body: dict) -> None:
        st = self.state
        if not body.get("name") or not body.get("type"):
            return self._send(400, {"message": "Required fields: name, type"})
        if any(d["name"] == body["name"] for d in st.datasources.values()):
            return self._send(409, {"message": "data source with the same name already exists"})
        uid = body.get("uid") or f"ds{st.new_id()}"
        if uid in st.datasources:
            return self._send(409, {"message": "data source with the same uid already exists"})
        ds = {**body, "id": st.new_id(), "uid": uid, "orgId": 1, "version": 1, "readOnly": False}
        st.datasources[uid] = ds
        return self._send(
            200, {"datasource": ds, "id": ds["id"], "message": "Datasource added", "name": ds["name"]}
        )

    def _datasource_update(self, uid: str, body: dict) -> None:
        st = self.state
        old = st.datasources.get(uid)
        if not old:
            return self._send(404, {"message": "Data source not found"})
        ds = {
            **body,
            "id": old["id"],
            "uid": uid,
            "orgId": 1,
            "version": old["version"] + 1,
            "readOnly": False,
        }
        st.datasources[uid] = ds
        return self._send(
            200, {"datasource": ds, "id": ds["id"], "message": "Datasource updated", "name": ds["name"]}
        )

    def _annotation_create(self, body: dict) -> None:
        st = self.state
        if not body.get("text"):
            return self._send(400, {"message": "Text field should not be empty"})
        now_ms = int(time.time() * 1000)
        when = body.get("time") or now_ms
        ann = {
            "id": st.new_id(),
            "dashboardUID": body.get("dashboardUID"),
            "panelId": body.get("panelId") or 0,
            "time": when,
            "timeEnd": body.get("timeEnd") or when,
            "tags": list(body.get("tags") or []),
            "text": body["text"],
        }
        st.annotations.append(ann)
        return self._send(200, {"message": "Annotation added", "id": ann["id"]})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is part of the tests


@contextlib.contextmanager
def grafana_standin(
    token: str = "glsa_standin_token", basic: tuple[str, str] | None = None
) -> Iterator[StandIn]:
    """Serve the stand-in on a free loopback port for the duration of the block."""
    state = StandIn(url="", token=token, basic=basic)
    handler = type("Handler", (_Handler,), {"state": state})
    server = _QuietServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
