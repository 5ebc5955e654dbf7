"""`swarm run`: one command for a distributed run on this machine.

Starts (optionally) the embedded simulator, a Locust master and N Locust worker processes that
talk over Locust's ZeroMQ transport exactly as on separate machines, waits for them, merges the
workers' record parts into `DIR/requests.parquet` and prints the results table from the master's
summary (swarm/live/master.py), which it then writes as `DIR/summary.json`, once, the search's why
added (orchestrate/collect.py).

Ctrl-C (or SIGTERM) stops every process this command started, simulator included, and still
writes what it has.

The steps, each in a module of its own: the options checked into a plan (orchestrate/plan.py),
the command lines (orchestrate/commands.py), the pollers of the target's and the GPUs' metrics
(orchestrate/pollers.py), the wait and the stop (orchestrate/waiting.py), and what is collected
and printed afterwards (orchestrate/collect.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from swarm.core.apikey import BoundKey, bind_origins
from swarm.core.errors import TargetError, UsageError
from swarm.core.options import DEFAULT_STOP_TIMEOUT_S
from swarm.core.run_options import RUN_GROUPS, add_run_options
from swarm.core.terminal import shown
from swarm.core.urls import endpoint_label
from swarm.orchestrate import outdir
from swarm.orchestrate.collect import finish
from swarm.orchestrate.commands import master_command, sim_command, worker_command
from swarm.orchestrate.plan import START_TIMEOUT_S, RunPlan, check_locust_args, describe_load, plan_from_args
from swarm.orchestrate.processes import Processes, free_port, sigterm_as_interrupt
from swarm.orchestrate.serverproc import wait_answering
from swarm.orchestrate.waiting import WORKER_EXIT_S, interrupted, wait_for_master

if TYPE_CHECKING:
    from swarm.grafana.api import Annotator
    from swarm.orchestrate.pollers import ServerPoller
    from swarm.orchestrate.progress import Progress

DEFAULT_SIM_PROFILE = "rtx5090x4-qwen3.6-27b"


def configure(p: argparse.ArgumentParser) -> None:
    """swarm run's options, in the sections of RUN_GROUPS (target, load, workload, search/SLO, outputs,
    observability): its own, then the option table's, every workload option included."""
    from swarm.load.workloads import WORKLOADS

    g = {name: p.add_argument_group(title) for name, title in RUN_GROUPS.items()}
    g["target"].add_argument(
        "--host",
        help="target base URL (e.g. http://127.0.0.1:8000), or several endpoints comma-separated "
        "(http://a:8000,http://b:8000: load spread by --balance, each scraped and diagnosed on its own); "
        "default: start the embedded simulator",
    )
    g["target"].add_argument(
        "--sim-profile",
        default=DEFAULT_SIM_PROFILE,
        help=f"simulator profile when no --host is given (default {DEFAULT_SIM_PROFILE})",
    )
    g["target"].add_argument(
        "--sim-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for the embedded simulator (repeatable), e.g. --sim-arg=--max-num-seqs=64",
    )
    g["load"].add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    g["load"].add_argument(
        "-u", "--users", type=int, default=16, help="concurrent users in total (default 16)"
    )
    g["load"].add_argument(
        "-r", "--spawn-rate", type=float, default=None, help="users started per second (default: all at once)"
    )
    g["load"].add_argument("-t", "--run-time", default="30s", help="run time, e.g. 30s, 5m (default 30s)")
    g["load"].add_argument(
        "--stop-timeout",
        default=f"{DEFAULT_STOP_TIMEOUT_S}s",
        help=f"at the end, let in-flight requests finish for this long (default {DEFAULT_STOP_TIMEOUT_S}s); "
        "those still running then are recorded as cancelled",
    )
    g["load"].add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the whole plan N times (DIR/repeat-1 ... DIR/repeat-N) and report, per stage, the mean "
        "and its 95%% interval across the runs (DIR/repeat.json)",
    )
    g["outputs"].add_argument("--out", default=None, help="output directory (default: runs/<run id>)")
    g["outputs"].add_argument(
        "--overwrite",
        action="store_true",
        help="replace the earlier run that --out holds (refused by default: runs never mix)",
    )
    add_run_options(g, WORKLOADS)  # the option table's, each in its section
    g["observability"].add_argument(
        "--server-metrics",
        default=None,
        help="target /metrics URL to poll during the run (default: the target's own /metrics)",
    )
    g["observability"].add_argument(
        "--gpu-metrics",
        action="append",
        default=[],
        metavar="URL",
        help="dcgm-exporter /metrics URL to poll with the server metrics (repeatable or comma-separated: "
        "one per GPU host), e.g. http://gpu-host:9400/metrics",
    )
    g["observability"].add_argument(
        "--grafana-url",
        default=os.environ.get("GRAFANA_URL"),
        help="post run start/stop and stage annotations to this Grafana (token from $GRAFANA_TOKEN)",
    )
    p.add_argument(
        "locust_args",
        nargs=argparse.REMAINDER,
        help="after --: Locust's own options, passed to master and workers (e.g. -- --loglevel DEBUG); "
        "the workload options above work there too, but not both before and after --",
    )


def run_options() -> set[str]:
    """swarm run's own option strings (those of `configure`; -h is Locust's too)."""
    parser = argparse.ArgumentParser(add_help=False)
    configure(parser)
    return {o for a in parser._actions for o in a.option_strings}


def main(args: argparse.Namespace) -> int:
    plan = plan_from_args(args, run_options())
    check_locust_args(plan.extra, ["--workload", plan.workload])
    api_key = args.api_key or os.environ.get("OPENAI_API_KEY")
    if args.repeat == 1:
        return execute(plan, api_key)
    return repeat(plan, api_key, args.repeat)


def repeat(plan: RunPlan, api_key: str | None, n: int) -> int:
    """The plan `n` times, each a full run directory under plan.out; then the mean and 95% interval
    across the runs per stage (swarm/analysis/repeat.py) in plan.out/repeat.json and on stdout.
    Returns the first non-zero exit code of a run (an interrupt stops the series), else 0."""
    import dataclasses

    from swarm.analysis.repeat import across_runs, render
    from swarm.core.runfiles import REPEAT_JSON, SUMMARY, repeat_dir_name

    # the series' directory; each run claims its own below it
    outdir.claim(plan.out, plan.run_id, overwrite=plan.overwrite)
    summaries, code = [], 0
    for i in range(1, n + 1):
        print(f"swarm: repeat {i} of {n}")
        run = dataclasses.replace(plan, out=plan.out / repeat_dir_name(i), run_id=f"{plan.run_id}-r{i}")
        got = execute(run, api_key)
        code = code or got
        path = run.out / SUMMARY
        if path.exists():
            summaries.append(json.loads(path.read_text()))
        if got == 130:
            break
    if summaries:
        result = across_runs(summaries)
        (plan.out / REPEAT_JSON).write_text(json.dumps(result, indent=2) + "\n")
        print(render(result))
        print(f"swarm: {len(summaries)} runs; across-run statistics in {plan.out / REPEAT_JSON}")
    return code


def execute(plan: RunPlan, api_key: str | None) -> int:
    """Start everything, wait, collect. Returns the master's exit code. The key goes only to the
    origins it is bound to (`bound_key`), from this process as from the master and workers."""
    from swarm.grafana.api import Annotator
    from swarm.orchestrate.pollers import start_gpu_pollers

    outdir.claim(plan.out, plan.run_id, overwrite=plan.overwrite)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if api_key:
        env["OPENAI_API_KEY"] = api_key  # children read it from the environment, never argv
    procs = Processes(plan.out)
    pollers: list[ServerPoller] = []
    progress: Progress | None = None
    annotator = Annotator.from_env(plan.grafana_url) if plan.grafana_url else None
    master_code = 1
    quit_early: set[str] = set()  # workers that exited while the master still ran
    try:
        with sigterm_as_interrupt():
            hosts = plan.hosts or _start_sim(plan, procs, env)
            key = bound_key(plan, api_key, hosts)  # once: the check, the pollers and the processes
            if plan.hosts:
                check_targets(hosts, key, model=plan.model)
            master, prom_port = _start_locust(plan, procs, env, hosts)
            load = describe_load(plan)
            print(
                f"swarm: run {plan.run_id}: master + {plan.workers} workers, {load}, "
                f"{plan.workload}, {plan.expected_s}s -> {plan.out}"
            )
            pollers += [p.start() for p in _server_pollers(plan, hosts, key)]
            pollers += start_gpu_pollers(plan.gpu_metrics, plan.out, interval_s=1.0)
            if annotator is not None:
                annotator.run_started(plan.run_id, detail=f"{plan.workload}, {load}")
            progress = _start_progress(plan, prom_port, annotator)
            master_code = wait_for_master(plan, procs, master, quit_early)
    except KeyboardInterrupt:
        master_code = 130
        interrupted(plan, procs)
    finally:
        if progress is not None:
            progress.stop()
        # the workers leave once the master has their last reports; then the server may go
        procs.wait_exit([n for n, _ in procs.named("worker-")], WORKER_EXIT_S)
        for poller in pollers:
            poller.stop()  # a last scrape, so server counters cover the run's end
        procs.stop_all()
        if annotator is not None:
            annotator.run_finished(plan.run_id, detail=f"exit {master_code}")
    return finish(plan, master_code, procs, quit_early)


def _start_sim(plan: RunPlan, procs: Processes, env: dict[str, str]) -> tuple[str, ...]:
    """The embedded simulator started (and answering): its base URL (no --host given)."""
    port = free_port()
    sim = procs.start("sim", sim_command(plan, port), env, server=True)
    host = f"http://127.0.0.1:{port}"
    if not wait_answering(host, sim, START_TIMEOUT_S):  # the face's own health path: Ollama has no /health
        raise TargetError(f"embedded simulator did not start; its log:\n{procs.log_tail('sim')}")
    print(f"swarm: embedded simulator ({plan.sim_profile}) at {host}")
    return (host,)


def _start_locust(
    plan: RunPlan, procs: Processes, env: dict[str, str], hosts: tuple[str, ...]
) -> tuple[subprocess.Popen, int]:
    """The master, then its workers (every endpoint in their --host); the master and the port of
    its /metrics (the live line's)."""
    host = ",".join(hosts)
    master_port = free_port()
    prom_port = plan.prometheus_port or free_port()  # the progress line reads it too
    master = procs.start("master", master_command(plan, host, master_port, prom_port), env)
    for i in range(plan.workers):
        procs.start(f"worker-{i}", worker_command(plan, host, master_port), env)
    return master, prom_port


def bound_key(plan: RunPlan, api_key: str | None, hosts: Sequence[str]) -> BoundKey:
    """The key with the origins it is bound to, by the Locust processes' own rule
    (swarm/core/apikey.py `bind_origins`): --api-key-origin / $SWARM_API_KEY_ORIGIN (plan.api_key_origin)
    if given, else each endpoint of the --host the master and workers are given."""
    return BoundKey(api_key, bind_origins(plan.api_key_origin, ",".join(hosts)))


def _server_pollers(plan: RunPlan, hosts: tuple[str, ...], key: BoundKey) -> list[ServerPoller]:
    """One poller per endpoint, each of its /metrics (or --server-metrics for a single one), with the
    key only where its origin is one the key is bound to. One endpoint: DIR/server_metrics.jsonl; several: one file each
    (analysis/rundir.py `endpoint_metrics_name`), named with its endpoint in DIR/endpoints.json."""
    from swarm.analysis.server_metrics import metrics_url
    from swarm.core.runfiles import ENDPOINTS_JSON, SERVER_METRICS, endpoint_metrics_name
    from swarm.orchestrate.pollers import ServerPoller

    files = [SERVER_METRICS] if len(hosts) == 1 else [endpoint_metrics_name(i) for i in range(len(hosts))]
    if len(hosts) > 1:
        index = [{"label": endpoint_label(h), "server_metrics": f} for h, f in zip(hosts, files, strict=True)]
        (plan.out / ENDPOINTS_JSON).write_text(json.dumps({"endpoints": index}, indent=2) + "\n")
    pollers = []
    for host, name in zip(hosts, files, strict=True):
        metrics_at = plan.server_metrics or metrics_url(host, plan.server_family)
        pollers.append(
            ServerPoller(
                metrics_at,
                plan.out / name,
                interval_s=1.0,
                model=plan.model,
                key=key,
                family=plan.server_family,
            )
        )
    return pollers


def _start_progress(plan: RunPlan, prom_port: int, annotator: Annotator | None) -> Progress:
    """The live line, from the master's /metrics; each new stage annotated in Grafana."""
    from swarm.orchestrate.progress import Progress

    def on_stage(index: int, users: int) -> None:
        if annotator is not None and (plan.sweep or plan.rates or plan.search):
            annotator.stage_started(plan.run_id, index, label=f"{users} users")

    return Progress(
        f"http://127.0.0.1:{prom_port}/metrics",
        plan.expected_s,
        stages=-1 if plan.search else max(1, len(plan.sweep) or len(plan.rates)),
        on_stage=on_stage,
    ).start()


def check_targets(hosts: Sequence[str], key: BoundKey, model: str | None = None) -> None:
    """Every endpoint must answer (`check_target`, one line naming the one that does not) and serve
    what --model names. Without --model each endpoint is sent the model it serves itself (the
    workers discover each endpoint's model and dialect, swarm/live/user.py); endpoints serving
    different models are said in one line, so a mix nobody meant is seen before the load starts."""
    served = {endpoint_label(h): check_target(h, key, model=model) for h in hosts}
    if model is not None or len(hosts) < 2:
        return
    from swarm.client.dialects import first_model

    firsts = {label: first_model(listed) for label, listed in served.items() if listed is not None}
    if len(set(firsts.values())) > 1:
        each = ", ".join(
            f"{label} serves {shown(name) if name else '(no model)'}" for label, name in firsts.items()
        )
        print(
            f"swarm: the endpoints serve different models ({each}); each is sent its own (--model NAME: one for all)"
        )


def check_target(host: str, key: BoundKey, timeout_s: float = 5.0, model: str | None = None) -> Any:
    """Fail fast with one line when the target does not answer at all (before any user spawns), or
    when a model `model` names is not served (swarm.client.discovery.require_model_served).
    A 404 there, or a body that is not JSON, is no OpenAI-compatible server: refused too. Returns
    its /v1/models answer, parsed, or None on another HTTP error (401, 403, 5xx: it answers, and
    each request records its reason)."""
    from swarm.client.discovery import require_model_served
    from swarm.load.models import parse_models

    req = key.request(host + "/v1/models")  # the key only at its origins
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            return None  # it answers; auth or routing problems are recorded per request with their reason
        raise TargetError(_no_model_list(host, f"HTTP 404 {_said(e.read(QUOTED_BYTES))}")) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise TargetError(f"target {endpoint_label(host)} is unreachable: {reason}") from None
    try:
        listed = json.loads(body)
    except ValueError:
        raise TargetError(_no_model_list(host, f"a body that is not JSON {_said(body)}")) from None
    split = parse_models(model) if model else None
    if split is not None:
        try:
            require_model_served(listed, split.names, str(split), split.split)
        except UsageError as e:
            raise UsageError(f"{e} (endpoint {endpoint_label(host)})") from None
    return listed


def _no_model_list(host: str, answer: str) -> str:
    """The line for an endpoint whose GET /v1/models says it is no OpenAI-compatible server: every
    family the swarm speaks (docs/server-families.md, swarm/sim/faces.py) lists its models there."""
    return (
        f"target {endpoint_label(host)} answered GET /v1/models with {answer}: not an OpenAI-compatible "
        "server (vLLM, SGLang, TGI, TensorRT-LLM, llama.cpp and Ollama all list their models there); "
        "give the server's base URL"
    )


QUOTED_BYTES = 1024  # of a refusing answer's body, for its line


def _said(body: bytes) -> str:
    """What a target answered, quoted as one bounded line."""
    return f"({shown(' '.join(body.decode(errors='replace').split())) or 'empty'})"
