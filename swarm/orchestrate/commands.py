"""The command lines `swarm run` starts: the embedded simulator, the Locust master and its workers.

Pure functions of the run's plan (and the ports chosen at start): what they return is the argv
handed to swarm/orchestrate/processes.py, so a test can start exactly what `swarm run` starts.
The master and the workers get the same options (`locust_common_args`: target, workload, output
directory, run id, model, goodput, circuit breaker, whatever was handed on to Locust, and the
origins the API key is bound to); the master alone gets the load's shape (users, spawn rate, run
time, stages, search or trace).
"""

from __future__ import annotations

import sys
from pathlib import Path

from swarm.core.apikey import bind_origins
from swarm.core.runfiles import LOCUST_HTML, SIM_TRACE
from swarm.orchestrate.plan import START_TIMEOUT_S, RunPlan

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locustfile.py"
LOOPBACK = "127.0.0.1"


def locust_command() -> list[str]:
    """Locust on the swarm's locustfile, in this Python: the start of the master's and workers' argv."""
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]


def sim_models(model: str | None) -> str:
    """The embedded simulator's --model: the split's names (a,b), the one name, or sim-model."""
    from swarm.load.models import parse_models

    split = parse_models(model) if model else None
    return ",".join(split.names) if split is not None else "sim-model"


def sim_command(plan: RunPlan, port: int) -> list[str]:
    """`swarm sim` on loopback `port` with the plan's profile, tracing into the run directory."""
    return [
        sys.executable,
        "-m",
        "swarm",
        "sim",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--profile",
        plan.sim_profile,
        "--trace",
        str(plan.out / SIM_TRACE),
        "--model",
        sim_models(plan.model),
        *plan.sim_args,
    ]


def locust_common_args(plan: RunPlan, host: str) -> list[str]:
    """The options the master and every worker get alike."""
    args = [
        "--host",
        host,
        "--workload",
        plan.workload,
        "--swarm-out",
        str(plan.out),
        "--run-id",
        plan.run_id,
    ]
    if plan.model:
        args += ["--model", plan.model]
    if plan.goodput:  # workers judge each request, the master names it in summary.json
        args += ["--goodput", plan.goodput]
    if plan.abort_on:  # the master judges it (workers only parse it)
        args += ["--abort-on", plan.abort_on]
    # the key's origins, bound here by swarm run's own rule, so no process binds them otherwise
    bound = bind_origins(plan.api_key_origin, host)
    return args + plan.extra + (["--api-key-origin", bound] if bound else [])


def load_args(plan: RunPlan) -> list[str]:
    """The load's shape, for the master: a trace replay, a search, stages (users or rates) or a
    plain run time; then the SLO."""
    if plan.trace_args:
        args = list(plan.trace_args)
    elif plan.search:
        args = list(plan.search_args)
    elif plan.sweep or plan.rates:
        stages = (
            ["--sweep", ",".join(map(str, plan.sweep))]
            if plan.sweep
            else ["--rate", ",".join(f"{r:g}" for r in plan.rates), "--arrivals", plan.arrivals]
        )
        args = [*stages, "--stage-time", f"{plan.stage_time_s}s", "--warmup", f"{plan.warmup_s}s"]
    else:
        args = ["-t", f"{plan.run_time_s}s"]
    if plan.slo:
        args += ["--slo", plan.slo]
    return args


def master_command(plan: RunPlan, host: str, master_port: int, prometheus_port: int) -> list[str]:
    """The headless master: binds `master_port` on loopback, waits for the plan's workers, writes
    Locust's CSV and HTML beside the run's files, its summary as the part `swarm run` completes
    into summary.json, and serves /metrics on `prometheus_port`, on
    loopback unless a --prometheus-host handed on (later in the argv: it wins) opens it."""
    return [
        *locust_command(),
        "--master",
        "--headless",
        "--master-bind-host",
        LOOPBACK,
        "--master-bind-port",
        str(master_port),
        "--expect-workers",
        str(plan.workers),
        "--expect-workers-max-wait",
        str(int(START_TIMEOUT_S)),
        "-u",
        str(plan.users),
        "-r",
        str(plan.spawn_rate),
        "--stop-timeout",
        f"{plan.stop_timeout_s}s",
        "--csv",
        str(plan.out / "locust"),
        "--html",
        str(plan.out / LOCUST_HTML),
        "--only-summary",
        "--summary-part",  # summary.json is written once, complete, by swarm run (collect.py)
        "--prometheus-host",
        LOOPBACK,
        *locust_common_args(plan, host),
        *load_args(plan),
        "--prometheus-port",
        str(prometheus_port),
    ]


def worker_command(plan: RunPlan, host: str, master_port: int, master_host: str = LOOPBACK) -> list[str]:
    """One worker, connecting to the master at `master_host`:`master_port`."""
    return [
        *locust_command(),
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(master_port),
        *locust_common_args(plan, host),
    ]
