"""Every panel's PromQL, run through a real Prometheus (Debian's package) with the repo's own
dashboards/prometheus/prometheus.yml pointed at local ports:

- test_every_query_is_valid_promql: Prometheus parses and evaluates each query (no data needed).
- test_every_panel_returns_data: Prometheus scrapes a real `swarm run` (master + 2 workers) against
  `swarm sim`, and, in the config's second `vllm` target slot, a small exporter speaking the
  pre-0.12 vLLM names and the speculative-decoding counters (the simulator has neither), in the
  `dcgm` slot the dcgm-exporter stand-in (tests/helpers/dcgm_standin.py; no GPU here), and, as
  the `llamacpp` job's target, the simulator's llama.cpp face (`swarm sim --server llamacpp`) under
  a steady trickle of repeated prompts; each query returns a non-empty result with the dashboards'
  template variables set to the run's values.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from swarm.grafana import dashboards
from tests.helpers.dcgm_standin import DcgmStandin
from tests.helpers.sim_http import HELLO, trickle
from tests.helpers.support import REPO, Proc, free_port, sim_server, start, swarm_cmd, wait_http

pytestmark = pytest.mark.integration

PROM_CONFIG = REPO / "dashboards/prometheus/prometheus.yml"
RATE_INTERVAL = "10s"  # what Grafana's $__rate_interval is at a 1 s scrape interval, with margin
SIM_MODEL = "sim-model"
LEGACY_MODEL = "vllm-0.11-spec"  # the legacy exporter's model_name


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    assert path, "prometheus missing: run scripts/install-system-deps.sh (Debian package prometheus)"
    return path


def local_config(targets: dict[tuple[str, str], str], self_target: str, interval: str = "1s") -> dict:
    """The repo's config, each (job, static target) replaced by a local host:port, at `interval`.

    Targets not in `targets` are dropped; everything else (jobs, paths, labels) stays as checked in.
    """
    cfg = yaml.safe_load(PROM_CONFIG.read_text())
    cfg["global"].update(scrape_interval=interval, scrape_timeout=interval, evaluation_interval=interval)
    for job in cfg["scrape_configs"]:
        job.pop("scrape_interval", None)
        job.pop("scrape_timeout", None)
        static = []
        for sc in job["static_configs"]:
            if job["job_name"] == "prometheus":
                static.append({**sc, "targets": [self_target]})
                continue
            mapped = [targets[(job["job_name"], t)] for t in sc["targets"] if (job["job_name"], t) in targets]
            if mapped:
                static.append({**sc, "targets": mapped})
        job["static_configs"] = static
    return cfg


class Prometheus:
    def __init__(self, url: str, proc: Proc) -> None:
        self.url = url
        self.proc = proc

    def get(self, path: str, **params: str | list[str]) -> dict:
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422: bad query, the body says why
            return json.loads(e.read())

    def query(self, expr: str) -> dict:
        return self.get("/api/v1/query", query=expr)

    def targets_up(self) -> dict[str, float]:
        res = self.query("up")["data"]["result"]
        return {r["metric"]["instance"]: float(r["value"][1]) for r in res}


@contextlib.contextmanager
def start_prometheus(tmp_path: Path, cfg: dict, port: int) -> Iterator[Prometheus]:
    cfg_path = tmp_path / "prometheus.yml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    cmd = [
        prometheus_binary(),
        f"--config.file={cfg_path}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with start(cmd, tmp_path / "prometheus.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/-/ready", timeout=30, proc=proc.popen, log=proc.log)
        yield Prometheus(url, proc)


def substitute(expr: str, variables: dict[str, str], range_s: int) -> str:
    """What Grafana sends: its interval macros and the template variables filled in."""
    out = (
        expr.replace("$__rate_interval", RATE_INTERVAL)
        .replace("$__range", f"{range_s}s")
        .replace("$__interval", "2s")
    )
    for name in sorted(variables, key=len, reverse=True):
        out = out.replace(f"${name}", variables[name])
    assert "$" not in out, out
    return out


def all_queries() -> list[tuple[str, str, str, str]]:
    """(dashboard file, panel title, refId, expr), annotation queries included."""
    out = []
    for name, model in dashboards.build_all().items():
        out += [(name, title, ref, expr) for title, ref, expr in dashboards.panel_queries(model)]
        out += [
            (name, f"annotation {a['name']}", "-", a["expr"])
            for a in model["annotations"]["list"]
            if a.get("expr")
        ]
    return out


# ----------------------------------------------------------------------------- syntax only


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    port = free_port()
    cfg = local_config({}, f"127.0.0.1:{port}")
    with start_prometheus(tmp_path, cfg, port) as prom:
        promtool = shutil.which("promtool")
        assert promtool, "promtool missing: run scripts/install-system-deps.sh"
        check = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        bad = []
        for name, title, ref, expr in all_queries():
            answer = prom.query(
                substitute(expr, {"run_id": "r", "workload": ".*", "model_name": ".*", "instance": ".*"}, 300)
            )
            if answer.get("status") != "success":
                bad.append(f"{name} / {title} / {ref}: {answer.get('error')}")
        assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- with data


class LegacyVllmExporter:
    """/metrics as vLLM before 0.12 named them, plus speculative decoding; counters grow with time."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        handler = type("H", (_LegacyHandler,), {"exporter": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def text(self) -> str:
        t = time.monotonic() - self.t0 + 1.0
        lab = f'engine="0",model_name="{LEGACY_MODEL}"'
        lines = [
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            f"vllm:gpu_cache_usage_perc{{{lab}}} 0.42",
            "# TYPE vllm:gpu_prefix_cache_queries_total counter",
            f"vllm:gpu_prefix_cache_queries_total{{{lab}}} {1000 * t:.0f}",
            "# TYPE vllm:gpu_prefix_cache_hits_total counter",
            f"vllm:gpu_prefix_cache_hits_total{{{lab}}} {600 * t:.0f}",
            "# TYPE vllm:time_per_output_token_seconds histogram",
        ]
        n = 50 * t
        for le, share in (("0.01", 0.2), ("0.025", 0.7), ("0.05", 0.95), ("0.1", 1.0), ("+Inf", 1.0)):
            lines.append(f'vllm:time_per_output_token_seconds_bucket{{{lab},le="{le}"}} {share * n:.0f}')
        lines += [
            f"vllm:time_per_output_token_seconds_sum{{{lab}}} {0.02 * n:.3f}",
            f"vllm:time_per_output_token_seconds_count{{{lab}}} {n:.0f}",
        ]
        drafts = 20 * t
        lines += [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts:.0f}",
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {3 * drafts:.0f}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {2 * drafts:.0f}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        for pos, share in ((0, 0.9), (1, 0.7), (2, 0.4)):
            lines.append(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{pos}"}} '
                f"{share * drafts:.0f}"
            )
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _LegacyHandler(BaseHTTPRequestHandler):
    exporter: LegacyVllmExporter

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = self.exporter.text().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


SWEEP = "2,4"  # two closed-loop stages: a stage change for the annotation query
STAGE_S = 14
RUN_S = 2 * STAGE_S  # the sweep ends the run after its stages


@pytest.mark.serial
@pytest.mark.slow
def test_every_panel_returns_data(tmp_path: Path) -> None:
    run_id = "promql-test"
    master_prom = free_port()
    prom_port = free_port()
    with contextlib.ExitStack() as stack:
        legacy = LegacyVllmExporter()
        stack.callback(legacy.close)
        dcgm = DcgmStandin("gpu-a", [90.0, 5.0])
        stack.callback(dcgm.close)
        sim = stack.enter_context(sim_server(tmp_path, "--profile", "instant", trace=False, model=SIM_MODEL))
        llama = stack.enter_context(
            sim_server(
                tmp_path, "--server", "llamacpp", "--profile", "instant", trace=False, model="tiny-qwen2"
            )
        )
        stack.enter_context(trickle([llama.url], {"messages": HELLO, "max_tokens": 8}))  # cache hits
        cfg = local_config(
            {
                ("swarm", "master:8089"): f"127.0.0.1:{master_prom}",
                ("vllm", "sim:8000"): sim.url.removeprefix("http://"),
                ("vllm", "target:8000"): f"127.0.0.1:{legacy.port}",
                ("llamacpp", "llamacpp:8080"): llama.url.removeprefix("http://"),
                ("dcgm", "dcgm-exporter:9400"): f"127.0.0.1:{dcgm.port}",
            },
            f"127.0.0.1:{prom_port}",
        )
        prom = stack.enter_context(start_prometheus(tmp_path, cfg, prom_port))
        run_cmd = swarm_cmd(
            "run", "--host", sim.url, "--workers", "2", "-u", "4", "-t", f"{RUN_S}s",
            "--prometheus-port", str(master_prom), "--run-id", run_id, "--workload", "mixed",
            "--out", str(tmp_path / "run"), "--stop-timeout", "5s", "--sweep", SWEEP, "--stage-time", f"{STAGE_S}s",
            "--goodput", "e2e<=60s",  # the Goodput panels' counters
        )  # fmt: skip
        run = stack.enter_context(start(run_cmd, tmp_path / "swarm-run.log"))
        t_start = time.monotonic()
        _wait_for_data(prom, run, run_id)
        time.sleep(max(0.0, STAGE_S + 12 - (time.monotonic() - t_start)))  # well into stage 2
        range_s = int(time.monotonic() - t_start) + 5
        up = prom.targets_up()
        assert up and all(v == 1.0 for v in up.values()), up
        failures = _check_all(prom, run_id, range_s)
        _check_variables(prom, run_id)
        _check_values(prom, run_id)
        assert not failures, "queries without data:\n" + "\n".join(failures)
        code = run.wait(timeout=RUN_S + 90)
        assert code == 0, run.output()[-3000:]


def _wait_for_data(prom: Prometheus, run: Proc, run_id: str, timeout_s: float = 60.0) -> None:
    """Until the master's first requests are scraped twice (rate() needs two samples)."""
    deadline = time.monotonic() + timeout_s
    expr = f'sum(rate(swarm_requests_total{{run_id="{run_id}"}}[{RATE_INTERVAL}])) > 0'
    while time.monotonic() < deadline:
        assert run.popen.poll() is None, "swarm run ended early:\n" + run.output()[-3000:]
        if prom.query(expr)["data"]["result"]:
            return
        time.sleep(1)
    raise AssertionError("no swarm_requests_total in Prometheus; swarm run log:\n" + run.output()[-3000:])


def _check_all(prom: Prometheus, run_id: str, range_s: int) -> list[str]:
    failures = []
    for name, title, ref, expr in all_queries():
        model = (
            LEGACY_MODEL if "spec_decode" in expr else SIM_MODEL
        )  # the simulator has no speculative decoding
        variables = {"run_id": run_id, "workload": ".*", "model_name": model, "instance": ".*"}
        q = substitute(expr, variables, range_s)
        answer = prom.query(q)
        if answer.get("status") != "success":
            failures.append(f"{name} / {title} / {ref}: {answer.get('error')}\n    {q}")
        elif not answer["data"]["result"]:
            failures.append(f"{name} / {title} / {ref}: empty\n    {q}")
        if "gpu_" in expr or "time_per_output_token_seconds" in expr:  # the pre-0.12 branch alone
            legacy = prom.query(substitute(expr, {**variables, "model_name": LEGACY_MODEL}, range_s))
            if not legacy["data"]["result"]:
                failures.append(f"{name} / {title} / {ref}: no data from pre-0.12 names")
    return failures


def _check_variables(prom: Prometheus, run_id: str) -> None:
    """The template variables' label_values(...) queries find the run, its workloads and model."""
    for model in dashboards.build_all().values():
        for v in model["templating"]["list"]:
            q = v["query"].replace("$run_id", run_id)
            metric, label = q.removeprefix("label_values(").removesuffix(")").rsplit(", ", 1)
            values = prom.get(f"/api/v1/label/{label}/values", **{"match[]": metric})["data"]
            assert values, f"{v['name']}: {q}"
            if v["name"] == "run_id":
                assert run_id in values
            if v["name"] == "model_name":
                assert SIM_MODEL in values, (
                    f"{metric} has model_name {values}, not the served {SIM_MODEL!r}: the master must learn the "
                    "model the workers discovered (environment.swarm_model_name, swarm/live/plugin.py)"
                )


def _scalar(prom: Prometheus, expr: str) -> float:
    result = prom.query(expr)["data"]["result"]
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def _check_values(prom: Prometheus, run_id: str) -> None:
    """A few numbers that must be right, not only present."""
    sel = f'run_id="{run_id}"'
    assert _scalar(prom, f"max(swarm_workers{{{sel}}})") == 2
    assert _scalar(prom, f"max(swarm_stage{{{sel}}})") >= 1
    assert _scalar(prom, f"sum(rate(swarm_output_tokens_total{{{sel}}}[{RATE_INTERVAL}]))") > 0
    ttft = _scalar(
        prom,
        f"histogram_quantile(0.99, sum by (le) (rate(swarm_ttft_seconds_bucket{{{sel}}}[{RATE_INTERVAL}])))",
    )
    assert math.isfinite(ttft) and ttft > 0
    kv = _scalar(
        prom,
        f'max(vllm:kv_cache_usage_perc{{model_name="{LEGACY_MODEL}"}} '
        f'or vllm:gpu_cache_usage_perc{{model_name="{LEGACY_MODEL}"}})',
    )
    assert kv == pytest.approx(0.42)
