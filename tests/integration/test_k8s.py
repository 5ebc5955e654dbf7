"""deploy/k8s as far as a machine without a cluster can check it: `kubectl kustomize` renders every
overlay; every object validates offline against the Kubernetes OpenAPI schemas (kubernetes-validate,
strict: unknown fields fail) and the PodMonitor/ServiceMonitor against prometheus-operator's models;
the objects refer to each other correctly (ConfigMap, Secret, Service selectors, named ports); the
master and worker commands, with the environment the kubelet gives them, parse with Locust's own
parser; and the dashboard ConfigMaps hold exactly the generated dashboards."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as monitoring

from swarm.grafana import dashboards
from tests.helpers.locust_parse import parse_locust
from tests.helpers.support import REPO

K8S = REPO / "deploy/k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
APP = "/app"  # docker/Dockerfile: WORKDIR /app, COPY swarm
MONITORING = {"PodMonitor": monitoring.PodMonitor, "ServiceMonitor": monitoring.ServiceMonitor}


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path, "kubectl missing (it renders deploy/k8s with its built-in kustomize)"
    return path


_rendered: dict[str, list[dict]] = {}


def render(overlay: str) -> list[dict]:
    if overlay not in _rendered:
        r = subprocess.run(
            [kubectl(), "kustomize", str(K8S / "overlays" / overlay)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        _rendered[overlay] = [d for d in yaml.safe_load_all(r.stdout) if d]
    return _rendered[overlay]


def by_kind(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def workloads(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] in ("Deployment", "Job")]


def containers(obj: dict) -> list[dict]:
    return obj["spec"]["template"]["spec"]["containers"]


def kubelet_env(container: dict, objs: list[dict]) -> dict[str, str]:
    """The container's environment as the kubelet builds it from envFrom ConfigMaps and plain env
    (secretKeyRefs are left out: no Secret is in the manifests)."""
    maps = by_kind(objs, "ConfigMap")
    env: dict[str, str] = {}
    for src in container.get("envFrom", []):
        env.update(maps[src["configMapRef"]["name"]]["data"])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
    return env


def expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command/args: a defined VAR is replaced, `$$` is a `$`."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]) if m[1] else "$", arg)


def role_container(objs: list[dict], role: str) -> tuple[dict, dict]:
    [obj] = [o for o in workloads(objs) if o["metadata"]["labels"]["app.kubernetes.io/component"] == role]
    [c] = containers(obj)
    return obj, c


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_against_the_schemas(overlay: str) -> None:
    objs = render(overlay)
    kinds = {o["kind"] for o in objs}
    assert {"ConfigMap", "Service", "PodMonitor"} <= kinds and kinds & {"Deployment", "Job"}
    for obj in objs:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        assert obj["metadata"].get("namespace") == "llm-swarm", name
        model = MONITORING.get(obj["kind"])
        if model is not None:
            # The CRD's generated model; a field it does not know would vanish in the round trip.
            parsed = model.model_validate(obj)
            assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == obj, name
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_rejects_what_the_cluster_would() -> None:
    """The schema check above can fail: a misspelt field, a string for an integer, a bad monitor."""
    deployment = next(o for o in render("sim") if o["kind"] == "Deployment")
    typo = yaml.safe_load(yaml.safe_dump(deployment))
    containers(typo)[0]["imagePullPolicey"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES_VERSIONS[0], strict=True)
    wrong_type = yaml.safe_load(yaml.safe_dump(deployment))
    wrong_type["spec"]["replicas"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSIONS[0], strict=True)
    monitor = yaml.safe_load(yaml.safe_dump(by_kind(render("sim"), "PodMonitor")["llm-swarm-master"]))
    monitor["spec"]["podMetricsEndpoint"] = monitor["spec"].pop("podMetricsEndpoints")
    parsed = monitoring.PodMonitor.model_validate(monitor)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) != monitor


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_objects_refer_to_each_other(overlay: str) -> None:
    objs = render(overlay)
    maps, services = by_kind(objs, "ConfigMap"), by_kind(objs, "Service")
    assert not by_kind(objs, "Secret"), (
        "no Secret in the manifests: the API key comes from `kubectl create secret`"
    )
    pods = [(o, o["spec"]["template"]) for o in workloads(objs)]
    for obj, template in pods:
        labels = template["metadata"]["labels"]
        if obj["kind"] == "Deployment":
            assert obj["spec"]["selector"]["matchLabels"].items() <= labels.items()
        spec = template["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        for c in spec["containers"]:
            where = f"{obj['metadata']['name']}/{c['name']}"
            assert c["image"] == "llm-swarm:local", (
                where
            )  # the repo's Dockerfile (docs/distributed.md "Kubernetes": set your registry's)
            assert {"cpu", "memory"} <= c["resources"]["requests"].keys() & c["resources"]["limits"].keys(), (
                where
            )
            for src in c.get("envFrom", []):
                assert src["configMapRef"]["name"] in maps, where
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref == {"name": "llm-swarm-api-key", "key": "OPENAI_API_KEY", "optional": True}
            ports = {p["name"] for p in c.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                if c.get("ports"):
                    assert probe in c, f"{where}: {probe}"
                    assert c[probe]["httpGet"]["port"] in ports, where
            for arg in c["command"]:
                for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
                    assert var in kubelet_env(c, objs), f"{where}: $({var}) is not in its environment"
    for svc in services.values():
        selected = [
            (o, t) for o, t in pods if svc["spec"]["selector"].items() <= t["metadata"]["labels"].items()
        ]
        assert len(selected) == 1, f"Service {svc['metadata']['name']} selects {len(selected)} pod templates"
        ports = {p["name"] for c in selected[0][1]["spec"]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports
    for mon in by_kind(objs, "PodMonitor").values():
        selected = [
            t
            for _, t in pods
            if mon["spec"]["selector"]["matchLabels"].items() <= t["metadata"]["labels"].items()
        ]
        assert selected, f"PodMonitor {mon['metadata']['name']} selects nothing"
        ports = {p["name"] for t in selected for c in t["spec"]["containers"] for p in c.get("ports", [])}
        assert {e["port"] for e in mon["spec"]["podMetricsEndpoints"]} <= ports
    _, worker = role_container(objs, "worker")
    master_host = worker["command"][worker["command"].index("--master-host") + 1]
    assert master_host in services and {p["port"] for p in services[master_host]["spec"]["ports"]} >= {
        5557,
        8089,
    }
    host = maps["llm-swarm-run"]["data"]["LOCUST_HOST"]
    if overlay.startswith("sim"):
        assert host == "http://llm-swarm-sim:8000" and "llm-swarm-sim" in services
    else:
        assert "llm-swarm-sim" not in services and by_kind(objs, "ServiceMonitor")


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("role", ["master", "worker"])
def test_locust_accepts_the_commands(overlay: str, role: str, tmp_path: Path) -> None:
    """Locust's own parser (with the swarm's options) on the command and environment the kubelet
    gives each container; a headless master judges the SLOs and waits for all its workers."""
    objs = render(overlay)
    obj, c = role_container(objs, role)
    env = kubelet_env(c, objs)
    cmd = [expand(a, env) for a in c["command"]]
    assert cmd[:2] == ["locust", "-f"] and cmd[2].startswith(APP + "/")
    opts = parse_locust(REPO / cmd[2].removeprefix(APP + "/"), cmd[3:], env, tmp_path)
    run = by_kind(objs, "ConfigMap")["llm-swarm-run"]["data"]
    assert opts["host"] == run["LOCUST_HOST"] and opts["workload"] == run["SWARM_WORKLOAD"]
    assert opts["run_id"] == "k8s" and opts["swarm_out"] == "/runs"
    headless = overlay.endswith("-job")
    assert obj["kind"] == ("Job" if headless else "Deployment")
    if role == "worker":
        assert opts["worker"] and opts["master_host"] == "llm-swarm-master"
        return
    assert opts["master"] and opts["num_users"] == int(run["LOCUST_USERS"])
    assert opts["enable_rebalancing"], "workers that join a running test get users"
    if not headless:
        assert not opts["headless"] and opts["web_port"] == 8089
        assert opts["web_host"] == "0.0.0.0"  # the swarm's default is 127.0.0.1; probes use the pod IP
        return
    assert opts["headless"] and opts["prometheus_port"] == 8089 and opts["slo"]
    assert obj["spec"]["backoffLimit"] == 0 and obj["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    worker_job, _ = role_container(objs, "worker")
    assert opts["expect_workers"] == worker_job["spec"]["parallelism"] == worker_job["spec"]["completions"]
    from swarm.stats import slo

    assert slo.parse(opts["slo"])


def test_the_dashboard_configmaps_are_the_generated_dashboards() -> None:
    maps = [
        m
        for m in render("sim")
        if m["kind"] == "ConfigMap" and m["metadata"]["labels"].get("grafana_dashboard")
    ]
    assert all(m["metadata"]["labels"]["grafana_dashboard"] == "1" for m in maps)
    data = {name: text for m in maps for name, text in m["data"].items()}
    built = dashboards.build_all()
    assert data.keys() == built.keys()
    for name, model in built.items():
        assert data[name] == dashboards.render(model), f"{name}: run `make k8s-dashboards`"
        assert data[name] == (REPO / dashboards.DASHBOARD_DIR / name).read_text()
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts/k8s_dashboards.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
