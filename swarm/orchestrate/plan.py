"""`swarm run`'s plan: every option checked up front into one `RunPlan`, before anything starts.

A bad option is one UsageError (one line, exit 2): counts and limits (workers per core, users per
worker's open files, a busy --prometheus-port), URLs, the workload and its files, the objectives,
the search, the trace to replay, the embedded simulator's options, and the options handed on to
Locust (checked by Locust's own parser in a process of its own: `check_locust_args`).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.core.apikey import ORIGIN_ENV, bind_origins
from swarm.core.errors import EXIT_USAGE, UsageError
from swarm.core.options import BY_FLAG
from swarm.core.run_options import passed_on, passed_on_args
from swarm.core.units import check_run_id, new_run_id, parse_duration, parse_timespan
from swarm.core.urls import check_url, split_hosts
from swarm.load.stages import StagePlan

START_TIMEOUT_S = 30.0  # for the simulator to answer, and for the workers to connect to the master


@dataclass
class RunPlan:
    hosts: tuple[str, ...]  # the endpoints' base URLs (--host URL1,URL2,...); () = the embedded simulator
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
    server_family: str = "auto"  # --server-family: the metric names the poller reads /metrics with
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
    # --api-key-origin / $SWARM_API_KEY_ORIGIN, checked, as origins; None: the key goes to the --host
    # endpoints (swarm/core/apikey.py `bind_origins`; commands.py hands the result to every process)
    api_key_origin: str | None = None

    @property
    def expected_s(self) -> int:
        """How long the load lasts (without the end's stop timeout)."""
        if self.trace_span_s is not None:
            return math.ceil(self.trace_span_s) + 2
        if self.search:
            return self.search_budget_s
        stages = len(self.sweep) or len(self.rates)
        return stages * self.stage_time_s if stages else self.run_time_s


def describe_load(plan: RunPlan) -> str:
    """The load in a few words, for the start line and the run's annotation."""
    if plan.trace_span_s is not None:
        return (
            f"trace replay of {plan.trace_args[1]} over {plan.trace_span_s:.1f} s, "
            f"at most {plan.users} in flight"
        )
    if plan.search:
        return f"search {plan.search} (budget {plan.search_budget_s}s)"
    if plan.sweep:
        return f"stages {','.join(map(str, plan.sweep))} users x {plan.stage_time_s}s"
    if plan.rates:
        return (
            f"open loop {','.join(f'{r:g}' for r in plan.rates)} req/s ({plan.arrivals}) x "
            f"{plan.stage_time_s}s, at most {plan.users} in flight"
        )
    return f"{plan.users} users"


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
                             "--expect-workers-max-wait", "--processes", "--csv", "--html", "--swarm-out",
                             "--summary-part")  # fmt: skip


def _refuse_options_swarm_run_sets(extra: list[str], before: list[str], run_options: Collection[str]) -> None:
    """An option after -- that swarm run sets itself would be silently overridden by swarm run's own
    value (or override it on the master only): refused, naming where it belongs. The passed-on ones
    (the workload options, ...) are welcome after -- as before it, but not both ways at once (which
    one was meant?): refused too. `before`: the passed-on options given before --; `run_options`:
    swarm run's own option strings."""
    for arg in extra:
        name = arg.split("=", 1)[0]
        opt = BY_FLAG.get(name)
        if opt is not None and passed_on(opt):
            if name in before:
                raise UsageError(f"{name} is given both before and after --: give it once")
            continue
        if name in run_options:
            raise UsageError(
                f"{name} after --: it is a swarm run option, give it before -- (swarm run {name} ...)"
            )
        if name in LOCUST_OPTIONS_SET_BY_RUN:
            raise UsageError(f"{name} after --: swarm run sets it itself for the master and its workers")


def sim_config(sim_args: Sequence[str], label: str = "--sim-arg") -> Any:
    """`swarm sim SIM_ARGS` parsed and checked as `swarm sim` would (its SimConfig); UsageError,
    prefixed with `label`, for what it refuses."""
    from swarm.sim.cli import build_config
    from swarm.sim.cli import configure as configure_sim

    parser = argparse.ArgumentParser(prog="swarm sim", exit_on_error=False, add_help=False)
    configure_sim(parser)
    try:
        ns, unknown = parser.parse_known_args(list(sim_args))
    except argparse.ArgumentError as e:
        raise UsageError(f"{label}: {e}") from None
    if unknown:
        raise UsageError(f"{label}: unknown simulator option {' '.join(unknown)!r} (see swarm sim --help)")
    return build_config(ns)


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


def plan_from_args(args: argparse.Namespace, run_options: Collection[str]) -> RunPlan:
    """Validate every option up front: one clear UsageError, before anything starts. `run_options`:
    swarm run's own option strings (refused after --, where they would reach Locust)."""
    run_time = _check_counts(args)
    # --host once: each endpoint checked; an empty item or one given twice refused
    hosts = split_hosts(args.host) if args.host is not None else ()
    stages = StagePlan.parse(args.sweep, args.rate, *_stage_times(args))
    _check_users(args.users, args.workers, "-u/--users")
    _check_users(max(stages.levels, default=1), args.workers, "--sweep level")
    gpu_metrics = _metrics_urls(args, hosts)
    extra = _handed_on(args, run_options)
    key_origin, extra = _key_origin(extra)
    _check_workload_and_objectives(args, extra)
    search_args, budget_s = _search_args(args, stages) if args.search else ([], 0)
    _check_around_the_run(args)
    run_id = check_run_id(args.run_id) if args.run_id else new_run_id()
    trace_args, trace_span = _trace_plan(args, stages)
    return RunPlan(
        hosts=hosts,
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
        stage_time_s=int(stages.stage_s),
        warmup_s=int(stages.warmup_s),
        server_metrics=args.server_metrics,
        server_family=args.server_family,
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
        api_key_origin=key_origin,
    )


def _stage_times(args: argparse.Namespace) -> tuple[float, float]:
    """--stage-time and --warmup in seconds, parsed once (StagePlan checks them against each other);
    (0, 0) where no stage or search reads them, as the master is then handed neither. Parsed either
    way: a value that means nothing is refused, not ignored (`-t 5s --stage-time bogus`)."""
    stage_s = float(parse_timespan(args.stage_time, "--stage-time"))
    warmup_s = float(parse_timespan(args.warmup, "--warmup"))
    if not (args.sweep or args.rate or args.search):
        return 0.0, 0.0
    return stage_s, warmup_s


def _key_origin(extra: list[str]) -> tuple[str | None, list[str]]:
    """--api-key-origin (its last value, as Locust's parser takes it, before -- or after it), else
    $SWARM_API_KEY_ORIGIN: its origins (UsageError when it is not http(s) URLs), and the handed-on
    options without it (swarm run hands every process the origins it binds the key to itself)."""
    flag = "--api-key-origin"
    given, rest, i = None, [], 0
    while i < len(extra):
        if extra[i].startswith(flag + "="):
            given = extra[i].split("=", 1)[1]
        elif extra[i] == flag and i + 1 < len(extra):
            given, i = extra[i + 1], i + 1
        else:
            rest.append(extra[i])
        i += 1
    if given is None:
        given = os.environ.get(ORIGIN_ENV) or None
    return bind_origins(given, None), rest


def _check_counts(args: argparse.Namespace) -> int:
    """--workers, --repeat, -u, -r and -t; returns the run time in seconds."""
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
    return run_time


def _metrics_urls(args: argparse.Namespace, hosts: tuple[str, ...]) -> list[str]:
    """--server-metrics checked (one URL: one endpoint); the --gpu-metrics URLs (repeated or
    comma-separated), each checked."""
    if args.server_metrics is not None:
        check_url(args.server_metrics, "--server-metrics", "http://127.0.0.1:8000/metrics")
        if len(hosts) > 1:
            raise UsageError(
                "--server-metrics names one /metrics: with several --host endpoints each is scraped at "
                "its own /metrics; leave it out"
            )
    gpu_metrics = [u.strip() for arg in args.gpu_metrics for u in arg.split(",") if u.strip()]
    for url in gpu_metrics:
        check_url(url, "--gpu-metrics", "http://gpu-host:9400/metrics")
    return gpu_metrics


def _handed_on(args: argparse.Namespace, run_options: Collection[str]) -> list[str]:
    """The options handed on to master and workers alike: the passed-on ones given before --, then
    Locust's own after it (those swarm run sets itself refused)."""
    extra = list(args.locust_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    before = passed_on_args(args)
    _refuse_options_swarm_run_sets(extra, before, run_options)
    return before + extra  # handed on to master and workers alike, wherever they were given


def _check_workload_and_objectives(args: argparse.Namespace, extra: list[str]) -> None:
    """The workload (and its files), --model, --slo, --goodput and --abort-on, parsed as the
    master and workers will."""
    from swarm.load.workloads import Knobs, parse_mix

    # raises UsageError naming the unknown workload / bad weight; `custom` reads --prompt-file, `dataset`
    # its --dataset (and --dataset-columns)
    mix = parse_mix(
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

        # WORKLOAD.METRIC names one of the run's workloads (a trace replay's requests are the
        # replay's own: checked by the master, swarm/live/user.py)
        slo.parse(args.slo, workloads=None if args.trace_replay else {w.name for w, _ in mix})
    if args.goodput is not None:
        from swarm.stats.goodput import parse_goodput

        parse_goodput(args.goodput)
    if args.abort_on is not None:
        from swarm.stats import abort

        abort.parse(args.abort_on)  # a bad condition: one line, exit 2, before anything starts


def _check_around_the_run(args: argparse.Namespace) -> None:
    """--grafana-url, the embedded simulator's options, --prometheus-port."""
    if args.grafana_url:
        from swarm.grafana.api import Annotator

        Annotator.from_env(args.grafana_url)  # validates the URL (UsageError); contacts nothing yet
    if args.host is None:
        sim_config(["--profile", args.sim_profile, *args.sim_arg])
    if args.prometheus_port is not None and not 0 < args.prometheus_port < 65536:
        raise UsageError(f"--prometheus-port must be 1-65535 (got {args.prometheus_port})")
    if args.prometheus_port is not None:
        _check_port_free(args.prometheus_port)


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


def _search_args(args: argparse.Namespace, stages: StagePlan) -> tuple[list[str], int]:
    """--search and its options, checked as the master will (UsageError), as master arguments."""
    from swarm.stats.search_spec import FIRST_RATE, SearchSpec

    if args.sweep:
        raise UsageError("--search chooses the stages itself: leave out --sweep")
    goodput = getattr(args, "goodput", None)  # helper C's --goodput, where it exists
    start = float(args.users) if args.search != "rate" else (stages.rates[0] if stages.rates else FIRST_RATE)
    spec = SearchSpec.parse(
        args.search, args.slo, args.goodput_min, args.search_precision, args.search_budget, start, goodput
    )
    for flag in ("--min-stage-time", "--saturation-guard"):  # (--stage-time, --warmup: _stage_times)
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
