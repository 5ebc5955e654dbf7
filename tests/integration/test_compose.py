"""docker-compose.yml, the checks that run processes: Locust's own parser (with the swarm plugin's
options) on the master and worker commands, `promtool check config` on the Prometheus config, and
Debian's docker-compose (`config`) on the file itself.
The file's other checks are in-process: tests/unit/orchestrate/test_compose.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers.compose import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    PROM_CONFIG,
    SERVICES,
    SWARM_IMAGE,
    compose,
    container_path,
)
from tests.helpers.locust_parse import parse_locust
from tests.helpers.support import REPO


@pytest.mark.parametrize("name", ["master", "worker"])
def test_locust_accepts_the_master_and_worker_commands(name: str, tmp_path: Path) -> None:
    """Locust's own parser (with the swarm plugin's options) accepts the command and environment."""
    svc = compose()["services"][name]
    cmd = svc["command"]
    assert cmd[:2] == ["locust", "-f"]
    locustfile = container_path(cmd[2])
    env = {k: str(v) for k, v in svc.get("environment", {}).items()}
    opts = parse_locust(locustfile, cmd[3:], env, tmp_path)
    assert opts["host"] == "http://sim:8000"
    assert opts["workload"] == "mixed" and opts["run_id"] == "compose"
    if name == "master":
        assert opts["master"] and opts["web_port"] == 8089 and opts["num_users"] == 16
        assert opts["web_host"] == "0.0.0.0"  # the swarm's default is 127.0.0.1: a container says so
        assert opts["autostart"] is False
    else:
        assert opts["worker"] and opts["master_host"] == "master"


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


def docker_compose() -> str:
    path = shutil.which("docker-compose")
    assert path, "docker-compose missing: run scripts/install-system-deps.sh (Debian package docker-compose)"
    return path


def env_example(password: str | None) -> dict[str, str]:
    """docker/env.example's settings (commented-out ones left out), with GRAFANA_ADMIN_PASSWORD."""
    env = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", ENV_EXAMPLE.read_text(), re.M))
    env.pop("GRAFANA_ADMIN_PASSWORD")
    if password is not None:
        env["GRAFANA_ADMIN_PASSWORD"] = password
    return env


def compose_config(env: dict[str, str], tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """`docker-compose config` (Debian's Compose, v1.29) on docker-compose.yml with `env` as its env file."""
    env_file = tmp_path / "compose.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    clean = {k: v for k, v in os.environ.items() if k not in env and not k.startswith("COMPOSE_")}
    project = ["--env-file", str(env_file), "--project-directory", str(REPO), "-f", str(COMPOSE_FILE)]
    return subprocess.run(
        [docker_compose(), *project, *flags, "config"],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("profile", [None, "gpu"])
def test_a_real_compose_accepts_the_file(profile: str | None, tmp_path: Path) -> None:
    """Debian's docker-compose validates the file against the Compose schema and interpolates it;
    what it resolves for the swarm's services is what the in-process tests read (tests/helpers/compose.py)."""
    env = env_example("not-a-default")
    r = compose_config(env, tmp_path, *(["--profile", profile] if profile else []))
    assert r.returncode == 0, r.stderr[-3000:]
    resolved = yaml.safe_load(r.stdout)
    ours = compose(env)["services"]
    assert set(resolved["services"]) == SERVICES  # Compose v1's `config` lists every profile's services
    for name in SWARM_IMAGE:
        svc = resolved["services"][name]
        assert svc["command"] == ours[name]["command"], name
        assert svc.get("environment", {}) == {k: str(v) for k, v in ours[name].get("environment", {}).items()}
        assert svc["image"] == "llm-swarm:local" and svc["build"]["dockerfile"] == "docker/Dockerfile"
    if profile == "gpu":
        devices = resolved["services"]["target"]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"]


def test_a_real_compose_refuses_a_missing_grafana_password(tmp_path: Path) -> None:
    r = compose_config(env_example(None), tmp_path)
    assert r.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in r.stderr
