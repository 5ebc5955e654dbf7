"""docker-compose.yml cannot run here (no Docker engine), so it is validated instead: it parses,
interpolates, every command and mounted path exists in the repo, host ports don't clash, the
Prometheus config scrapes the compose services. (Locust's parser on the master and worker commands,
and `promtool check config`, run processes: tests/integration/test_compose.py.)"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.helpers.compose import (
    ENV_EXAMPLE,
    GPU_PROFILE,
    PROM_CONFIG,
    SERVICES,
    SWARM_IMAGE,
    MissingVariable,
    compose,
    container_path,
    host_ports,
    raw,
    resolve,
    variables,
)
from tests.helpers.support import REPO

# ----------------------------------------------------------------------------- the file itself


def test_parses_with_the_expected_services() -> None:
    c = compose()
    assert set(c["services"]) == SERVICES
    assert all(c["services"][n]["profiles"] == ["gpu"] for n in GPU_PROFILE)
    assert all("profiles" not in s for n, s in c["services"].items() if n not in GPU_PROFILE), (
        "sim etc. are default"
    )


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


def test_dcgm_exporter_is_the_prometheus_dcgm_target() -> None:
    """--profile gpu: NVIDIA's dcgm-exporter on the GPUs, scraped by the `dcgm` job (the GPUs dashboard row)."""
    svc = compose()["services"]["dcgm-exporter"]
    assert svc["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert "SYS_ADMIN" in svc["cap_add"]  # its embedded host engine reads the profiling counters
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"]
    jobs = {j["job_name"]: j for j in yaml.safe_load(PROM_CONFIG.read_text())["scrape_configs"]}
    (target,) = [t for sc in jobs["dcgm"]["static_configs"] for t in sc["targets"]]
    name, port = target.split(":")
    assert name == "dcgm-exporter" and any(p.endswith(f":{port}") for p in svc["ports"])
