"""docker-compose.yml, the checks that run processes: Locust's own parser (with the swarm plugin's
options) on the master and worker commands, and `promtool check config` on the Prometheus config.
The file's other checks are in-process: tests/unit/orchestrate/test_compose.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.compose import PROM_CONFIG, compose, container_path

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
