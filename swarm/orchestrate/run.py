"""`swarm run`: one command for a distributed run on this machine.

Starts (optionally) the embedded simulator, a Locust master and N Locust worker processes that
talk over Locust's ZeroMQ transport exactly as on separate machines, waits for them, merges the
workers' record parts into `DIR/requests.parquet` and prints the results table from
`DIR/summary.json` (written by the master, see swarm/live/plugin.py).

Ctrl-C (or SIGTERM) stops every process this command started, simulator included, and still
writes what it has.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from swarm.core.apikey import key_for, origin
from swarm.core.errors import EXIT_USAGE, TargetError, UsageError
from swarm.core.options import (
    BY_FLAG,
    CUT_NOW_SIGNAL,
    DEFAULT_STOP_TIMEOUT_S,
    FINAL_REPORT_WAIT_S,
    RUN_GROUPS,
    add_run_options,
    passed_on,
    passed_on_args,
)
from swarm.core.units import check_run_id, new_run_id, parse_duration, parse_timespan
from swarm.core.urls import check_host, check_url
from swarm.load.stages import StagePlan
from swarm.orchestrate import outdir
from swarm.orchestrate.processes import Processes, free_port, sigterm_as_interrupt, wait_http

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locustfile.py"
DEFAULT_SIM_PROFILE = "rtx5090x4-qwen3.6-27b"
START_TIMEOUT_S = 30.0
STOP_MARGIN_S = 15.0  # beyond those, for the master to write the summary on a busy machine
WORKER_EXIT_S = 10.0  # for the workers to leave once the master has ended


def configure(p: argparse.ArgumentParser) -> None:
    """swarm run's options, in the sections of RUN_GROUPS (target, load, workload, search/SLO, outputs,
    observability): its own, then the option table's, every workload option included."""
    from swarm.load.workloads import WORKLOADS

    g = {name: p.add_argument_group(title) for name, title in RUN_GROUPS.items()}
    g["target"].add_argument(
        "--host", help="target base URL (e.g. http://127.0.0.1:8000); default: start the embedded simulator"
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


@dataclass
class RunPlan:
    host: str | None
    workload: str
    workers: int
    users: int
    spawn_rate: float
    run_time_s: int
    stop_timeout_s: int
    out: Path
    run_id: str
    slo: str | None
    model: str | None
    sim_profile: str
    sim_args: list[str]
    prometheus_port: int | None
    sweep: list[int] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    arrivals: str = "poisson"
    stage_time_s: int = 30
    warmup_s: int = 0
    server_metrics: str | None = None
    grafana_url: str | None = None
    extra: list[str] = field(default_factory=list)
    gpu_metrics: list[str] = field(default_factory=list)
    goodput: str | None = None
    trace_args: list[str] = field(default_factory=list)  # --trace-replay and its options, for the master
    trace_span_s: float | None = None  # the replay's length (after --time-scale and the window)
    search: str | None = None  # --search mode
    search_args: list[str] = field(default_factory=list)  # the search's options, for the master
    search_budget_s: int = 0
    abort_on: str | None = None  # --abort-on: the master's circuit breaker (swarm/stats/abort.py)
    overwrite: bool = False  # --overwrite: replace the earlier run --out holds

    @property
    def expected_s(self) -> int:
        """How long the load lasts (without the end's stop timeout)."""
        if self.trace_span_s is not None:
            return math.ceil(self.trace_span_s) + 2
        if self.search:
            return self.search_budget_s
        stages = len(self.sweep) or len(self.rates)
        return stages * self.stage_time_s if stages else self.run_time_s


def _locust_option(args: list[str], name: str) -> str | None:
    """The value of `name VALUE` / `name=VALUE` among the Locust options passed after --."""
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


# Locust options that swarm run gives master and workers itself (its own options are refused too)
LOCUST_OPTIONS_SET_BY_RUN = ("-f", "--locustfile", "--master", "--worker", "--master-host", "--master-port",
                             "--master-bind-host", "--master-bind-port", "--expect-workers",
                             "--expect-workers-max-wait", "--processes", "--csv", "--html", "--swarm-out")  # fmt: skip


def _refuse_options_swarm_run_sets(extra: list[str], before: list[str]) -> None:
    """An option after -- that swarm run sets itself would be silently overridden by swarm run's own
    value (or override it on the master only): refused, naming where it belongs. The passed-on ones
    (the workload options, ...) are welcome after -- as before it, but not both ways at once (which
    one was meant?): refused too. `before`: the passed-on options given before --."""
    parser = argparse.ArgumentParser(add_help=False)
    configure(parser)
    own = {o for a in parser._actions for o in a.option_strings}
    for arg in extra:
        name = arg.split("=", 1)[0]
        opt = BY_FLAG.get(name)
        if opt is not None and passed_on(opt):
            if name in before:
                raise UsageError(f"{name} is given both before and after --: give it once")
            continue
        if name in own:
            raise UsageError(
                f"{name} after --: it is a swarm run option, give it before -- (swarm run {name} ...)"
            )
        if name in LOCUST_OPTIONS_SET_BY_RUN:
            raise UsageError(f"{name} after --: swarm run sets it itself for the master and its workers")


def _check_sim_args(sim_args: list[str]) -> None:
    """The embedded simulator's options (--sim-profile, --sim-arg), checked as `swarm sim` would."""
    from swarm.sim.cli import build_config
    from swarm.sim.cli import configure as configure_sim

    parser = argparse.ArgumentParser(prog="swarm sim", exit_on_error=False, add_help=False)
    configure_sim(parser)
    try:
        ns, unknown = parser.parse_known_args(sim_args)
    except argparse.ArgumentError as e:
        raise UsageError(f"--sim-arg: {e}") from None
    if unknown:
        raise UsageError(f"--sim-arg: unknown simulator option {' '.join(unknown)!r} (see swarm sim --help)")
    build_config(ns)


# Locust raises a process's open-file limit to this when the hard limit allows (locust/main.py,
# `minimum_open_file_limit`): a worker may hold at least this many sockets.
LOCUST_OPEN_FILES = 10_000
WORKERS_PER_CORE = 4


def worker_open_files() -> int:
    """How many files (sockets) one worker may hold open: this process's limit, which the workers
    inherit, raised as Locust raises it at start-up."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return sys.maxsize
    if soft < LOCUST_OPEN_FILES and (hard == resource.RLIM_INFINITY or hard >= LOCUST_OPEN_FILES):
        return LOCUST_OPEN_FILES
    return soft


def _check_users(users: int, workers: int, option: str) -> None:
    """Every user keeps one connection (a socket, a file descriptor) open on its worker: more users
    than the workers can open files for can only fail, and an absurd count (-u 99999999999) would
    keep Locust's master busy dispatching them for minutes. Refused, with the limit and its cause."""
    per_worker = worker_open_files()
    if users > per_worker * workers:
        raise UsageError(
            f"{option} {users}: each user holds a connection open, and {workers} worker(s) may open at "
            f"most {per_worker} files each (ulimit -n): give at most {per_worker * workers} users, more "
            "--workers, or raise ulimit -n"
        )


def _check_workers(workers: int) -> None:
    """A worker is one Python process running its users on one core: past a few per core they only
    take CPU from each other (and from the target when it shares the machine). --workers 100000
    would fork a hundred thousand processes: refused above WORKERS_PER_CORE per core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers > WORKERS_PER_CORE * cores:
        raise UsageError(
            f"--workers {workers}: at most {WORKERS_PER_CORE * cores} here ({WORKERS_PER_CORE} per core, "
            f"{cores} core(s)): each worker is a process running on one core, more only contend for it"
        )


def _check_port_free(port: int) -> None:
    """--prometheus-port: the master serves /metrics there and the live line reads it; a port another
    process holds would leave the live line reading that process. Bound (and let go) here, as the
    master's server binds it (all interfaces, SO_REUSEADDR), so a busy port is one line up front."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            raise UsageError(
                f"--prometheus-port {port}: cannot listen there ({e.strerror or e}): give a free port, "
                "or leave it out for one chosen by swarm run"
            ) from None


def plan_from_args(args: argparse.Namespace) -> RunPlan:
    """Validate every option up front: one clear UsageError, before anything starts."""
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {args.workers})")
    _check_workers(args.workers)
    if getattr(args, "repeat", 1) < 1:
        raise UsageError(f"--repeat must be at least 1 (got {args.repeat})")
    if args.users < 1:
        raise UsageError(f"-u/--users must be at least 1 (got {args.users})")
    if args.spawn_rate is not None and not (math.isfinite(args.spawn_rate) and args.spawn_rate > 0):
        raise UsageError(f"-r/--spawn-rate must be > 0 and finite (got {args.spawn_rate})")
    run_time = parse_timespan(args.run_time, "-t/--run-time")
    if run_time <= 0:
        raise UsageError("-t/--run-time must be > 0, e.g. 30s")
    if args.host is not None:
        check_host(args.host)
    from swarm.load.workloads import Knobs, parse_mix

    stages = StagePlan.parse(args.sweep, args.rate, args.stage_time, args.warmup)
    _check_users(args.users, args.workers, "-u/--users")
    _check_users(max(stages.levels, default=1), args.workers, "--sweep level")
    if args.server_metrics is not None:
        check_url(args.server_metrics, "--server-metrics", "http://127.0.0.1:8000/metrics")

    gpu_metrics = [u.strip() for arg in args.gpu_metrics for u in arg.split(",") if u.strip()]
    for url in gpu_metrics:
        check_url(url, "--gpu-metrics", "http://gpu-host:9400/metrics")

    extra = list(args.locust_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    before = passed_on_args(args)
    _refuse_options_swarm_run_sets(extra, before)
    extra = before + extra  # handed on to master and workers alike, wherever they were given
    # raises UsageError naming the unknown workload / bad weight; `custom` reads --prompt-file, `dataset`
    # its --dataset (and --dataset-columns)
    parse_mix(
        args.workload,
        Knobs(
            prompt_file=_locust_option(extra, "--prompt-file"),
            dataset=_locust_option(extra, "--dataset"),
            dataset_columns=_locust_option(extra, "--dataset-columns"),
        ),
    )
    if args.model is not None:
        from swarm.load.models import parse_models

        parse_models(args.model)  # NAME or a split a:3,b:1; UsageError on a:0, a:x, an empty one
    if args.slo is not None:  # --slo "" too: an empty objective list is refused, not ignored
        from swarm.stats import slo

        slo.parse(args.slo)
    if args.goodput is not None:
        from swarm.stats.goodput import parse_goodput

        parse_goodput(args.goodput)
    if args.abort_on is not None:
        from swarm.stats import abort

        abort.parse(args.abort_on)  # a bad condition: one line, exit 2, before anything starts
    search_args, budget_s = _search_args(args) if args.search else ([], 0)
    if args.grafana_url:
        from swarm.grafana.api import Annotator

        Annotator.from_env(args.grafana_url)  # validates the URL (UsageError); contacts nothing yet
    if args.host is None:
        _check_sim_args(["--profile", args.sim_profile, *args.sim_arg])
    if args.prometheus_port is not None and not 0 < args.prometheus_port < 65536:
        raise UsageError(f"--prometheus-port must be 1-65535 (got {args.prometheus_port})")
    if args.prometheus_port is not None:
        _check_port_free(args.prometheus_port)
    run_id = check_run_id(args.run_id) if args.run_id else new_run_id()
    trace_args, trace_span = _trace_plan(args, stages)
    return RunPlan(
        host=args.host.rstrip("/") if args.host else None,
        workload=args.workload,
        workers=args.workers,
        users=args.users,
        spawn_rate=args.spawn_rate or float(args.users),
        run_time_s=run_time,
        stop_timeout_s=parse_timespan(args.stop_timeout, "--stop-timeout"),
        out=Path(args.out or f"runs/{run_id}"),
        run_id=run_id,
        slo=args.slo,
        abort_on=args.abort_on,
        model=args.model,
        sim_profile=args.sim_profile,
        sim_args=list(args.sim_arg),
        prometheus_port=args.prometheus_port,
        sweep=list(stages.levels),
        rates=list(stages.rates),
        arrivals=args.arrivals,
        stage_time_s=int(stages.stage_s) or 30,
        warmup_s=int(stages.warmup_s),
        server_metrics=args.server_metrics,
        grafana_url=args.grafana_url or None,
        extra=extra,
        gpu_metrics=gpu_metrics,
        goodput=args.goodput,
        trace_args=trace_args,
        trace_span_s=trace_span,
        search=args.search,
        search_args=search_args,
        search_budget_s=budget_s,
        overwrite=bool(getattr(args, "overwrite", False)),
    )


TRACE_OPTIONS = ("trace_replay", "trace_format", "time_scale", "trace_start", "trace_duration",
                 "trace_block_size", "trace_max_lag")  # fmt: skip


def _trace_plan(args: argparse.Namespace, stages: StagePlan) -> tuple[list[str], float | None]:
    """--trace-replay: the trace checked here (a bad line: one line, exit 2, before anything starts),
    its options for the master, and how long the replay lasts."""
    if not args.trace_replay:
        return [], None
    if stages.levels or stages.rates:
        raise UsageError("--trace-replay sets its own schedule: drop --sweep / --rate")
    parse_duration(args.trace_max_lag, "--trace-max-lag")  # as the master reads it, before anything starts
    from swarm.load.trace import load_trace

    trace = load_trace(
        args.trace_replay,
        args.trace_format,
        time_scale=args.time_scale,
        start_s=parse_duration(args.trace_start, "--trace-start"),
        duration_s=parse_duration(args.trace_duration, "--trace-duration") if args.trace_duration else None,
        block_size=args.trace_block_size,
    )
    out: list[str] = []
    for name in TRACE_OPTIONS:
        value = getattr(args, name)
        if value not in (None, ""):
            out += ["--" + name.replace("_", "-"), str(value)]
    return out, trace.span_s


def _search_args(args: argparse.Namespace) -> tuple[list[str], int]:
    """--search and its options, checked as the master will (UsageError), as master arguments."""
    from swarm.stats.search_spec import SearchSpec

    if args.sweep:
        raise UsageError("--search chooses the stages itself: leave out --sweep")
    goodput = getattr(args, "goodput", None)  # helper C's --goodput, where it exists
    start = float(args.users) if args.search != "rate" else float((args.rate or "1").split(",")[0])
    spec = SearchSpec.parse(
        args.search, args.slo, args.goodput_min, args.search_precision, args.search_budget, start, goodput
    )
    for flag in ("--stage-time", "--warmup", "--min-stage-time", "--saturation-guard"):
        dest = flag[2:].replace("-", "_")
        parse_timespan(getattr(args, dest), flag)
    out = ["--search", args.search, "--search-precision", args.search_precision]
    out += ["--search-budget", args.search_budget, "--min-stage-time", args.min_stage_time]
    out += [
        "--stage-time",
        args.stage_time,
        "--warmup",
        args.warmup,
        "--saturation-guard",
        args.saturation_guard,
    ]
    if args.goodput_min:
        out += ["--goodput-min", args.goodput_min]
    if args.search == "rate" and args.rate:
        out += ["--rate", args.rate, "--arrivals", args.arrivals]
    return out, int(spec.budget_s)


def check_target(host: str, api_key: str | None, timeout_s: float = 5.0, model: str | None = None) -> None:
    """Fail fast with one line when the target does not answer at all (before any user spawns), or
    when a model `model` names is not served (swarm.client.discovery.require_model_served)."""
    from swarm.client.discovery import require_model_served
    from swarm.load.models import parse_models

    req = urllib.request.Request(host + "/v1/models")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            body = r.read()
    except urllib.error.HTTPError:
        return  # it answers; auth or routing problems are recorded per request with their reason
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise TargetError(f"target {host} is unreachable: {reason}") from None
    split = parse_models(model) if model else None
    if split is not None:
        try:
            listed = json.loads(body)
        except ValueError:
            return  # no model list to check against: the workers' discovery tells per request
        require_model_served(listed, split.names, str(split), split.split)


def _sim_models(model: str | None) -> str:
    """The embedded simulator's --model: the split's names (a,b), the one name, or sim-model."""
    from swarm.load.models import parse_models

    split = parse_models(model) if model else None
    return ",".join(split.names) if split is not None else "sim-model"


def locust_common_args(plan: RunPlan, host: str) -> list[str]:
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
    return args + plan.extra


def execute(plan: RunPlan, api_key: str | None) -> int:
    """Start everything, wait, collect. Returns the master's exit code."""
    from swarm.analysis.gpu_metrics import GpuPoller, start_gpu_pollers
    from swarm.analysis.server_metrics import ServerPoller, metrics_url
    from swarm.grafana.api import Annotator
    from swarm.orchestrate.progress import Progress

    outdir.claim(plan.out, plan.run_id, overwrite=plan.overwrite)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if api_key:
        env["OPENAI_API_KEY"] = api_key  # children read it from the environment, never argv
    procs = Processes(plan.out)
    poller: ServerPoller | None = None
    gpu_pollers: list[GpuPoller] = []
    progress: Progress | None = None
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else None
    annotator = Annotator.from_env(plan.grafana_url) if plan.grafana_url else None
    master_code = 1
    quit_early: set[str] = set()  # workers that exited while the master still ran
    try:
        with sigterm_as_interrupt():
            host = plan.host
            if host is None:
                port = free_port()
                sim_cmd = [
                    sys.executable,
                    "-m",
                    "swarm",
                    "sim",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--profile",
                    plan.sim_profile,
                    "--trace",
                    str(plan.out / "sim-trace.jsonl"),
                    "--model",
                    _sim_models(plan.model),
                    *plan.sim_args,
                ]
                sim = procs.start("sim", sim_cmd, env, server=True)
                host = f"http://127.0.0.1:{port}"
                if not wait_http(host + "/health", sim, START_TIMEOUT_S):
                    raise TargetError(f"embedded simulator did not start; its log:\n{procs.log_tail('sim')}")
                print(f"swarm: embedded simulator ({plan.sim_profile}) at {host}")
            else:
                check_target(host, api_key, model=plan.model)
            master_port = free_port()
            common = locust_common_args(plan, host)
            master_cmd = [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(LOCUSTFILE),
                "--master",
                "--headless",
                "--master-bind-host",
                "127.0.0.1",
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
                str(plan.out / "locust.html"),
                "--only-summary",
                *common,
            ]
            if plan.trace_args:
                master_cmd += plan.trace_args
            elif plan.search:
                master_cmd += plan.search_args
            elif plan.sweep or plan.rates:
                stages = (
                    ["--sweep", ",".join(map(str, plan.sweep))]
                    if plan.sweep
                    else ["--rate", ",".join(f"{r:g}" for r in plan.rates), "--arrivals", plan.arrivals]
                )
                master_cmd += [
                    *stages,
                    "--stage-time",
                    f"{plan.stage_time_s}s",
                    "--warmup",
                    f"{plan.warmup_s}s",
                ]
            else:
                master_cmd += ["-t", f"{plan.run_time_s}s"]
            if plan.slo:
                master_cmd += ["--slo", plan.slo]
            prom_port = plan.prometheus_port or free_port()  # the progress line reads it too
            master_cmd += ["--prometheus-port", str(prom_port)]
            master = procs.start("master", master_cmd, env)
            for i in range(plan.workers):
                procs.start(
                    f"worker-{i}",
                    [
                        sys.executable,
                        "-m",
                        "locust",
                        "-f",
                        str(LOCUSTFILE),
                        "--worker",
                        "--master-host",
                        "127.0.0.1",
                        "--master-port",
                        str(master_port),
                        *common,
                    ],
                    env,
                )
            if plan.trace_span_s is not None:
                load = (
                    f"trace replay of {plan.trace_args[1]} over {plan.trace_span_s:.1f} s, "
                    f"at most {plan.users} in flight"
                )
            elif plan.search:
                load = f"search {plan.search} (budget {plan.search_budget_s}s)"
            elif plan.sweep:
                load = f"stages {','.join(map(str, plan.sweep))} users x {plan.stage_time_s}s"
            elif plan.rates:
                load = (
                    f"open loop {','.join(f'{r:g}' for r in plan.rates)} req/s ({plan.arrivals}) x "
                    f"{plan.stage_time_s}s, at most {plan.users} in flight"
                )
            else:
                load = f"{plan.users} users"
            print(
                f"swarm: run {plan.run_id}: master + {plan.workers} workers, {load}, "
                f"{plan.workload}, {plan.expected_s}s -> {plan.out}"
            )
            metrics_at = plan.server_metrics or metrics_url(host)
            poller = ServerPoller(
                metrics_at,
                plan.out / "server_metrics.jsonl",
                interval_s=1.0,
                model=plan.model,
                headers=auth if key_for(api_key, origin(host), metrics_at) else None,  # the key's origin only
            ).start()
            gpu_pollers = start_gpu_pollers(plan.gpu_metrics, plan.out, interval_s=1.0)
            if annotator is not None:
                annotator.run_started(plan.run_id, detail=f"{plan.workload}, {load}")

            def on_stage(index: int, users: int) -> None:
                if annotator is not None and (plan.sweep or plan.rates or plan.search):
                    annotator.stage_started(plan.run_id, index, label=f"{users} users")

            progress = Progress(
                f"http://127.0.0.1:{prom_port}/metrics",
                plan.expected_s,
                stages=-1 if plan.search else max(1, len(plan.sweep) or len(plan.rates)),
                on_stage=on_stage,
            ).start()
            deadline = time.monotonic() + plan.expected_s + plan.stop_timeout_s + 2 * START_TIMEOUT_S
            while master.poll() is None:
                quit_early.update(n for n, p in procs.named("worker-") if p.poll() is not None)
                if time.monotonic() > deadline:
                    print("swarm: master did not finish in time; stopping it", file=sys.stderr)
                    stop_gracefully(plan, procs)
                    break
                if workers_gone(procs):
                    print("swarm: every worker has quit; ending the run", file=sys.stderr)
                    stop_gracefully(plan, procs)
                    break
                time.sleep(0.5)
            master_code = master.poll() if master.poll() is not None else 1
    except KeyboardInterrupt:
        master_code = 130
        if procs.get("master") is None:
            print("swarm: interrupted before the run began; stopping", file=sys.stderr)
        else:
            print(
                f"swarm: interrupted: stopping the run; requests in flight may finish for up to "
                f"{plan.stop_timeout_s} s (Ctrl-C again cuts them now, recorded as cancelled)",
                file=sys.stderr,
            )
            stop_gracefully(plan, procs)
    finally:
        if progress is not None:
            progress.stop()
        # the workers leave once the master has their last reports; then the server may go
        procs.wait_exit([n for n, _ in procs.named("worker-")], WORKER_EXIT_S)
        if poller is not None:
            poller.stop()  # a last scrape, so server counters cover the run's end
        for gpu_poller in gpu_pollers:
            gpu_poller.stop()
        procs.stop_all()
        if annotator is not None:
            annotator.run_finished(plan.run_id, detail=f"exit {master_code}")
    return finish(plan, master_code, procs, quit_early)


def workers_gone(procs: Processes) -> bool:
    """Every worker has exited while the master still runs, one at least with an error (e.g. each
    refused its options at start: exit 2 with one line): nothing is left to load the server. (At a
    run's normal end the workers leave first too, with exit code 0, on the master's quit.)"""
    codes = [p.poll() for _, p in procs.named("worker-")]
    return bool(codes) and None not in codes and any(code != 0 for code in codes)


def stop_gracefully(plan: RunPlan, procs: Processes) -> None:
    """End the run the way Locust ends it: SIGTERM to the master, which stops its workers; they let
    their requests in flight finish for up to --stop-timeout, send their last reports, and the
    master writes the summary. The server stays up meanwhile. A second Ctrl-C (or SIGTERM) cuts
    the requests still in flight now (each recorded as `cancelled`), a third stops waiting."""
    procs.signal("master", signal.SIGTERM)
    budget = plan.stop_timeout_s + FINAL_REPORT_WAIT_S + STOP_MARGIN_S
    try:
        with sigterm_as_interrupt():
            if procs.wait_exit(["master"], budget):
                return
            print(f"swarm: the master did not end within {budget} s of the stop", file=sys.stderr)
    except KeyboardInterrupt:
        print("swarm: cutting the requests in flight now", file=sys.stderr)
    for name, _ in procs.named("worker-"):
        procs.signal(name, getattr(signal, CUT_NOW_SIGNAL))
    try:
        with sigterm_as_interrupt():
            procs.wait_exit(["master"], FINAL_REPORT_WAIT_S + STOP_MARGIN_S)
    except KeyboardInterrupt:
        print("swarm: stopping every process now", file=sys.stderr)


def worker_failures(procs: Processes, quit_early: set[str]) -> list[tuple[str, int, str]]:
    """Workers that exited with an error while the master still ran (not at the run's end, where a
    worker's exit code reflects its requests' failures): name, exit code and the last line of its
    log (its one-line reason)."""
    failed = []
    for name, p in procs.named("worker-"):
        code = p.poll()
        if code is not None and code > 0 and name in quit_early:  # (killed by a signal: "degraded")
            failed.append((name, code, reason_in_log(procs.log_tail(name))))
    return failed


LOG_PREFIX = re.compile(r"^\[[^\]]*\] [^/\s]+/(?:ERROR|CRITICAL)/[\w.]+: ")


def reason_in_log(text: str) -> str:
    """A process's one-line reason for quitting: its last error line (Locust's log prefix cut off),
    else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if LOG_PREFIX.match(line) or " error: " in line or line.startswith("Traceback"):
            return LOG_PREFIX.sub("", line)
    return lines[-1] if lines else "no output"


def check_locust_args(extra: list[str], common: list[str]) -> None:
    """The options handed on to Locust (the workload options, before `--` or after it), checked by Locust's own parser with the swarm's options, in a
    process of its own (swarm/live/argcheck.py): one line and exit 2 before anything starts."""
    if not extra:
        return
    proc = subprocess.run(
        [sys.executable, "-m", "swarm.live.argcheck", *common, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    if proc.returncode == EXIT_USAGE:
        why = (proc.stdout.strip().splitlines() or ["refused"])[-1]
        raise UsageError(f"{why} (an option handed on to Locust)")
    if proc.returncode != 0:
        raise UsageError(
            f"the options handed on to Locust could not be checked: {(proc.stderr or proc.stdout)[-300:]}"
        )


def finish(plan: RunPlan, master_code: int, procs: Processes, quit_early: set[str] | None = None) -> int:
    """Merge record parts, print the table and SLO lines, say where everything is."""
    from swarm.analysis.table import render, render_ci
    from swarm.core import recordfile as recorder

    failed = worker_failures(procs, quit_early or set())
    for name, code, line in failed:
        print(f"swarm: {name} exited {code}: {line}", file=sys.stderr)
    if failed and master_code == 0:  # a run some worker could not take part in is not a success
        master_code = 2 if all(code == 2 for _, code, _ in failed) else 1
    records_dir = plan.out / "records"
    n = 0
    if recorder.part_files(records_dir):
        table = recorder.read_table(records_dir)
        import pyarrow.parquet as pq

        pq.write_table(table, plan.out / "requests.parquet")
        n = table.num_rows
    summary_path = plan.out / "summary.json"
    summary = outdir.summary_of(plan.out, plan.run_id)  # this run's, never an earlier one's
    if summary is not None:
        print(render(summary))
        if (intervals := render_ci(summary)) is not None:
            print(intervals)
        from swarm.stats.trace_replay import replay_lines

        for line in replay_lines(summary):
            print(line)
        for line in summary.get("slo", []) or []:
            print(line if isinstance(line, str) else line.get("text", ""))
        if summary.get("target_unreachable_since"):
            print(
                f"swarm: the target went away at {summary['target_unreachable_since']}; "
                "every later request failed to connect"
            )
    else:
        print(
            f"swarm: no summary was written (master exit {master_code}); master log tail:\n"
            f"{procs.log_tail('master')}",
            file=sys.stderr,
        )
        return master_code or 1
    from swarm.analysis.report import write_report
    from swarm.analysis.search import early_ends

    for line in early_ends(summary):
        print(f"swarm: {line}")
    if summary.get("search"):
        print_search(plan.out, summary)
    report = write_report(plan.out, slo=None if plan.search else plan.slo)
    print(
        f"swarm: {n} request records in {plan.out / 'requests.parquet'}; summary in {summary_path}; "
        f"report in {report}"
    )
    return master_code


def print_search(out: Path, summary: dict) -> None:
    """The search's answer and, from the server's metrics, why; the reason goes into summary.json too."""
    from swarm.analysis.rundir import load_run
    from swarm.analysis.search import bottleneck
    from swarm.stats.summary import write

    search = summary["search"]
    why = bottleneck(load_run(out))
    print(f"swarm: {search.get('headline')}")
    if why:  # the finding's own sentence, once; its kind apart, for whoever reads summary.json
        print(f"swarm: why: {why.text}")
        search["why"], search["why_kind"] = why.text, why.kind
        write(summary, out / "summary.json")


def main(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
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

    from swarm.analysis.repeat import REPEAT_JSON, across_runs, render

    # the series' directory; each run claims its own below it
    outdir.claim(plan.out, plan.run_id, overwrite=plan.overwrite)
    summaries, code = [], 0
    for i in range(1, n + 1):
        print(f"swarm: repeat {i} of {n}")
        run = dataclasses.replace(plan, out=plan.out / f"repeat-{i}", run_id=f"{plan.run_id}-r{i}")
        got = execute(run, api_key)
        code = code or got
        path = run.out / "summary.json"
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
