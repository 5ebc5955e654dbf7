"""docker-compose.yml read as Compose reads it (variable interpolation included), without Docker:
shared by the compose tests (tests/unit/orchestrate, and tests/integration for the ones that run
Locust's parser and promtool)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.support import REPO

COMPOSE_FILE = REPO / "docker-compose.yml"


PROM_CONFIG = REPO / "dashboards/prometheus/prometheus.yml"


ENV_EXAMPLE = REPO / "docker/env.example"


APP = "/app"  # the repository root inside the swarm image (docker/Dockerfile: WORKDIR /app, COPY swarm)


SERVICES = {"target", "dcgm-exporter", "sim", "master", "worker", "prometheus", "grafana"}
GPU_PROFILE = ("target", "dcgm-exporter")  # only with `--profile gpu`


SWARM_IMAGE = ("sim", "master", "worker")


REQUIRED_ENV = {"GRAFANA_ADMIN_PASSWORD": "not-a-default"}


_VAR = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable syntax: $VAR ${VAR} ${VAR:-default} ${VAR-default} ${VAR:?err} ${VAR?err} $$."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        if m.group("plain"):
            return env.get(m.group("plain"), "")
        inner = m.group("braced")
        v = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])(.*))?", inner, re.S)
        assert v, f"bad interpolation ${{{inner}}}"
        name, colon, op, arg = v.groups()
        value = env.get(name)
        missing = value is None or (colon == ":" and value == "")
        if op == "-":
            return arg if missing else value
        if op == "?":
            if missing:
                raise MissingVariable(f"{name}: {arg}")
            return value
        return value or ""

    return _VAR.sub(one, text)


def resolve(node: Any, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(x, env) for x in node]
    if isinstance(node, dict):
        return {k: resolve(v, env) for k, v in node.items()}
    return node


def raw() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def compose(env: dict[str, str] | None = None) -> dict:
    return resolve(raw(), {**REQUIRED_ENV, **(env or {})})


def variables() -> set[str]:
    names = set()
    for m in _VAR.finditer(COMPOSE_FILE.read_text()):
        if m.group("plain"):
            names.add(m.group("plain"))
        elif m.group("braced"):
            names.add(re.match(r"[A-Za-z_][A-Za-z0-9_]*", m.group("braced")).group(0))
    return names


def host_ports(service: dict) -> list[int]:
    out = []
    for p in service.get("ports", []):
        parts = str(p).split(":")
        assert len(parts) == 2, f"ports as HOST:CONTAINER: {p}"
        out.append(int(parts[0]))
    return out


def container_path(path: str) -> Path:
    assert path.startswith(APP + "/"), path
    return REPO / path.removeprefix(APP + "/")
