"""docker-compose.yml cannot run here (no Docker engine), so it is validated instead: it parses,
interpolates, every command and mounted path exists in the repo, host ports don't clash, the
Prometheus config scrapes the compose services and passes `promtool check config`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO

COMPOSE_FILE = REPO / "docker-compose.yml"
PROM_CONFIG = REPO / "dashboards/prometheus/prometheus.yml"
ENV_EXAMPLE = REPO / "docker/env.example"
APP = "/app"  # the repository root inside the swarm image (docker/Dockerfile: WORKDIR /app, COPY swarm)
SERVICES = {"target", "sim", "master", "worker", "prometheus", "grafana"}
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


# ----------------------------------------------------------------------------- the file itself


def test_parses_with_the_expected_services() -> None:
    c = compose()
    assert set(c["services"]) == SERVICES
    assert c["services"]["target"]["profiles"] == ["gpu"]
    assert all("profiles" not in s for n, s in c["services"].items() if n != "target"), "sim etc. are default"


def test_grafana_password_comes_from_the_environment_without_default() -> None:
    env = raw()["services"]["grafana"]["environment"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", env["GF_SECURITY_ADMIN_PASSWORD"])
    with pytest.raises(MissingVariable, match="GRAFANA_ADMIN_PASSWORD"):
        resolve(raw(), {})
    with pytest.raises(MissingVariable):
        resolve(raw(), {"GRAFANA_ADMIN_PASSWORD": ""})
    assert compose()["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "not-a-default"


def test_configured_by_environment_variables() -> None:
    c = compose({"TARGET_URL": "http://10.0.0.5:8000", "MODEL": "m", "WORKLOAD": "chat", "USERS": "64"})
    master = c["services"]["master"]
    assert master["environment"]["LOCUST_HOST"] == "http://10.0.0.5:8000"
    assert master["environment"]["LOCUST_USERS"] == "64"
    assert c["services"]["worker"]["environment"]["LOCUST_HOST"] == "http://10.0.0.5:8000"
    for name in ("master", "worker"):
        cmd = c["services"][name]["command"]
        assert cmd[cmd.index("--workload") + 1] == "chat"
    assert "m" in c["services"]["target"]["command"] and "m" in c["services"]["sim"]["command"]
    assert compose()["services"]["master"]["environment"]["LOCUST_HOST"] == "http://sim:8000"


def test_every_variable_is_documented_in_env_example() -> None:
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.M))
    missing = variables() - documented
    assert not missing, f"document in docker/env.example: {sorted(missing)}"


def test_target_reserves_gpus_and_runs_vllm() -> None:
    t = compose()["services"]["target"]
    assert t["image"].startswith("vllm/vllm-openai")
    (dev,) = t["deploy"]["resources"]["reservations"]["devices"]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"]
    cmd = t["command"]
    assert cmd[cmd.index("--port") + 1] == "8000" and "--model" in cmd


def test_mounted_paths_and_build_files_exist() -> None:
    c = compose()
    for name, svc in c["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (REPO / src).exists(), f"{name}: {src} is not in the repo"
            else:
                assert src in c["volumes"], f"{name}: named volume {src} is not declared"
        if "build" in svc:
            assert (REPO / svc["build"]["context"]).is_dir()
            assert (REPO / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
    dockerfile = (REPO / "docker/Dockerfile").read_text()
    for src in re.findall(r"^COPY (.+) \S+$", dockerfile, re.M):
        for path in src.split():
            assert (REPO / path).exists(), f"Dockerfile copies {path}, which is not in the repo"


def test_host_ports_do_not_clash_and_workers_scale() -> None:
    c = compose()
    ports = [p for svc in c["services"].values() for p in host_ports(svc)]
    assert len(ports) == len(set(ports)), ports
    worker = c["services"]["worker"]
    assert "ports" not in worker and "container_name" not in worker, "--scale worker=N needs neither"
    assert all("container_name" not in s for s in c["services"].values())


def test_swarm_commands_exist() -> None:
    """`swarm ...` commands parse with the real CLI; locustfiles exist in the image (= repo) paths."""
    from swarm.cli import build_parser

    parser = build_parser()
    for name in SWARM_IMAGE:
        cmd = compose()["services"][name]["command"]
        assert cmd[0] in ("swarm", "locust"), cmd
        if cmd[0] == "swarm":
            parser.parse_args(cmd[1:])  # SystemExit(2) on an unknown command or option
        else:
            assert container_path(cmd[cmd.index("-f") + 1]).is_file()


_PARSE_LOCUST = """
import importlib.util, json, sys
import locust  # noqa: F401  (gevent first)
from locust.argument_parser import get_parser
spec = importlib.util.spec_from_file_location("locustfile", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
opts = get_parser(default_config_files=[]).parse_args(sys.argv[2:])
print(json.dumps({k: v for k, v in vars(opts).items() if isinstance(v, str | int | float | bool | None)}))
"""


@pytest.mark.parametrize("name", ["master", "worker"])
def test_locust_accepts_the_master_and_worker_commands(name: str, tmp_path: Path) -> None:
    """Locust's own parser (with the swarm plugin's options) accepts the command and environment."""
    svc = compose()["services"][name]
    cmd = svc["command"]
    assert cmd[:2] == ["locust", "-f"]
    locustfile = container_path(cmd[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "SWARM_"))}
    env.update({k: str(v) for k, v in svc.get("environment", {}).items()})
    r = subprocess.run(
        [sys.executable, "-c", _PARSE_LOCUST, str(locustfile), *cmd[3:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    opts = json.loads(r.stdout.strip().splitlines()[-1])
    assert opts["host"] == "http://sim:8000"
    assert opts["workload"] == "mixed" and opts["run_id"] == "compose"
    if name == "master":
        assert opts["master"] and opts["web_port"] == 8089 and opts["num_users"] == 16
        assert opts["autostart"] is False
    else:
        assert opts["worker"] and opts["master_host"] == "master"


# ----------------------------------------------------------------------------- prometheus


def _listening_port(service: dict) -> int:
    cmd = service.get("command", [])
    for flag in ("--port", "--web-port"):
        if flag in cmd:
            return int(cmd[cmd.index(flag) + 1])
    raise AssertionError(f"no --port/--web-port in {cmd}")


def test_prometheus_scrapes_master_and_target_every_5s() -> None:
    c = compose()
    prom = c["services"]["prometheus"]
    assert any(v.startswith("./dashboards/prometheus/prometheus.yml:") for v in prom["volumes"])
    cfg = yaml.safe_load(PROM_CONFIG.read_text())
    assert cfg["global"]["scrape_interval"] == "5s"
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    scraped = {t for name in ("swarm", "vllm") for sc in jobs[name]["static_configs"] for t in sc["targets"]}
    assert scraped == {"master:8089", "sim:8000", "target:8000"}
    for target in scraped:
        svc, port = target.split(":")
        assert _listening_port(c["services"][svc]) == int(port), target
    for name in ("swarm", "vllm"):
        assert jobs[name].get("scrape_interval", "5s") == "5s" and jobs[name]["metrics_path"] == "/metrics"


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool missing: run scripts/install-system-deps.sh (Debian package prometheus)"
    return path


def test_promtool_check_config() -> None:
    r = subprocess.run(
        [promtool(), "check", "config", str(PROM_CONFIG)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr
