"""`swarm tune`: a server's configurations searched, one `swarm run` each.

For every configuration (a --grid's cross product, a --configs file's list, or, with --guided, the
flag the diagnosis points at, one step at a time) the server is started with the base command plus
those flags, awaited, measured by `swarm run` (tune_run.py) and stopped; DIR/tune.json is written
after each one (so Ctrl-C or a crash leaves what is done), then the table, DIR/tune.html and the best
configuration with the command that starts it. Every option that is not tune's own is a swarm run
option, checked once up front with swarm run's own parser and handed to each configuration's run.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from swarm.core.errors import UsageError
from swarm.core.runfiles import TUNE_JSON
from swarm.core.terminal import printable
from swarm.tune.plan import Flags, check_distinct, config_name, grid_configs, parse_grid, read_configs

if TYPE_CHECKING:
    from swarm.orchestrate.virtual_run import VirtualLoad
    from swarm.tune.results import ConfigResult, GuidedStep, TuneResult, TuneSetting
    from swarm.tune.resume import Resumed
    from swarm.tune.run import TuneContext

DEFAULT_BUDGET = 6
# swarm run options tune sets itself (or that mean nothing against a started server)
NOT_HANDED_ON = {"--host", "--out", "--overwrite", "--sim-profile", "--sim-arg", "--repeat", "-h", "--help"}


def configure(p: argparse.ArgumentParser) -> None:
    own = p.add_argument_group("tune: the server and its configurations")
    own.add_argument(
        "--serve-cmd",
        metavar="CMD",
        help='the command that starts the server, e.g. "vllm serve M --tensor-parallel-size 4", '
        '"llama-server -m M.gguf", "python -m swarm sim"; each configuration adds its flags, --port '
        "and (unless given) --host 127.0.0.1",
    )
    own.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a flag's values to try (repeatable; the configurations are the cross product), e.g. "
        "max-num-seqs=64,256 or np=1,4; KEY is the flag without dashes (one or two letters get "
        "one dash, longer ones two) or written with them (--grid=-np=1,4)",
    )
    own.add_argument(
        "--configs",
        metavar="FILE",
        help='the configurations as a JSON list of objects {flag: value}, e.g. [{"max-num-seqs": 64}]',
    )
    own.add_argument(
        "--guided",
        action="store_true",
        help="from the base command (and the grid's first values), change the flag the diagnosis "
        "points at, re-measure, and go on while the answer improves (needs --search, or a --sweep "
        "whose answer is its highest stage meeting the --slo)",
    )
    own.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="N",
        help=f"--guided only: at most N configurations measured (default {DEFAULT_BUDGET}); a grid or "
        "--configs list is measured whole, so --budget without --guided is refused",
    )
    own.add_argument(
        "--predict-first",
        type=int,
        metavar="K",
        help="measure the base configuration, fit a twin to it (swarm twin), predict every configuration "
        "on its virtual clock and measure only the K best, each printed with its predicted answer and "
        "the error (needs --search concurrency, --slo ttft_p99<=LIMIT and --workload)",
    )
    own.add_argument(
        "--virtual",
        action="store_true",
        help="measure each configuration on the simulator's virtual clock instead of starting it: a "
        "--serve-cmd that runs `swarm sim` and a closed-loop --sweep of a built-in workload; the "
        "runs are written as swarm run writes them, in seconds (the engine's own timing, no HTTP)",
    )
    own.add_argument("--gpus", type=int, default=1, help="GPUs the server uses, for the cost (default 1)")
    own.add_argument(
        "--gpu-hourly-cost",
        type=float,
        default=None,
        metavar="X",
        help="price of one GPU for an hour: gives the cost per million output tokens and per "
        "thousand requests at each configuration's answer",
    )
    own.add_argument(
        "--health-timeout",
        default="10m",
        metavar="DURATION",
        help="how long a server may take to answer /health before its configuration fails (default 10m)",
    )
    own.add_argument(
        "--resume",
        metavar="DIR",
        help="go on with the tune in DIR: configurations already measured are skipped; the base "
        "command, the configurations and the swarm run options must be the ones it was measured under",
    )
    own.add_argument(
        "--resume-anyway",
        action="store_true",
        help="--resume although the command, configurations or options differ: tune.json keeps the "
        "earlier ones with the configurations measured under them",
    )
    own.add_argument("--out", metavar="DIR", help="the tune's directory (default: the --resume DIR)")
    _hand_on_run_options(p.add_argument_group("swarm run options, handed to each configuration's run"))


class _HandOn(argparse.Action):
    """A swarm run option: kept as written, in the order given, for each configuration's run."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = [option_string] if self.nargs == 0 else [option_string, values]
        namespace.run_argv = [*getattr(namespace, "run_argv", []), *given]


def _hand_on_run_options(group: argparse._ArgumentGroup) -> None:
    """swarm run's own options (its parser's), each taken as written (checked in `check_run_argv`)."""
    from swarm.orchestrate.run import configure as run_configure

    src = argparse.ArgumentParser(add_help=False)
    run_configure(src)
    group.set_defaults(run_argv=[])
    for action in src._actions:
        strings = [s for s in action.option_strings if s not in NOT_HANDED_ON]
        if not action.option_strings or len(strings) < len(action.option_strings):
            continue
        group.add_argument(
            *strings,
            action=_HandOn,
            nargs=0 if action.nargs == 0 else None,
            dest=f"run_{action.dest}",
            default=argparse.SUPPRESS,
            metavar=action.metavar or (None if action.choices or action.nargs == 0 else action.dest.upper()),
            choices=action.choices,
            help=action.help,
        )


class _Refusing(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise UsageError(f"swarm run option: {message}")


def check_run_argv(run_argv: list[str]) -> argparse.Namespace:
    """The swarm run options checked as swarm run checks them (its parser, then its plan), before
    any server starts: UsageError for a bad one."""
    from swarm.orchestrate.plan import plan_from_args
    from swarm.orchestrate.run import configure as run_configure
    from swarm.orchestrate.run import run_options

    parser = _Refusing(prog="swarm run", add_help=False)
    run_configure(parser)
    args = parser.parse_args([*run_argv, "--host", "http://127.0.0.1:1", "--out", "tune-check"])
    if args.locust_args:
        raise UsageError(f"unexpected arguments {' '.join(args.locust_args)!r}")
    plan_from_args(args, run_options())
    return args


@dataclass
class TunePlan:
    ctx: TuneContext
    configs: list[Flags]
    guided: bool
    budget: int
    search: str | None
    precision: float
    previous: dict[str, ConfigResult] = field(default_factory=dict)  # --resume: measured ones
    earlier: Resumed | None = None  # --resume: what the earlier tune was measured under
    predict_first: int | None = None  # --predict-first K
    slo: str | None = None
    workload: str | None = None


def plan_from_args(args: argparse.Namespace) -> TunePlan:
    """Every tune option checked (one UsageError) before any server starts."""
    from swarm.core.units import parse_duration, parse_share
    from swarm.stats.search_spec import DEFAULT_PRECISION
    from swarm.tune.run import TuneContext

    if not args.serve_cmd or not shlex.split(args.serve_cmd):
        raise UsageError('--serve-cmd is required: the command that starts the server, e.g. "vllm serve M"')
    if args.grid and args.configs:
        raise UsageError("--grid and --configs both list configurations: give one")
    out = Path(args.out or args.resume or "")
    if not (args.out or args.resume):
        raise UsageError("--out DIR is required: the tune's directory")
    if args.budget is not None and not args.guided:
        raise UsageError(
            "--budget caps --guided's steps: without --guided every configuration given is measured "
            "(give fewer, or add --guided)"
        )
    if args.resume_anyway and not args.resume:
        raise UsageError("--resume-anyway goes with --resume DIR")
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    if budget < 1 or args.gpus < 1:
        raise UsageError("--budget and --gpus must be >= 1")
    if args.gpu_hourly_cost is not None and not args.gpu_hourly_cost > 0:
        raise UsageError("--gpu-hourly-cost must be > 0")
    grid = parse_grid(args.grid)
    configs = read_configs(Path(args.configs)) if args.configs else grid_configs(grid)
    check_distinct(configs, f"--configs {args.configs}" if args.configs else "--grid")
    if args.guided:
        configs = [{f: v[0] for f, v in grid}] if grid else configs[:1]
    run_args = check_run_argv(args.run_argv)
    if args.guided and not (run_args.search or run_args.sweep):
        raise UsageError(
            "--guided needs --search or --sweep (with --slo): it follows the answer from one step to the next"
        )
    precision = (
        parse_share(run_args.search_precision, "--search-precision") if run_args.search_precision else None
    )
    if args.guided and not run_args.search and not run_args.slo:
        raise UsageError("--guided with a --sweep needs --slo: its answer is the highest stage meeting it")
    if args.predict_first is not None:
        from swarm.tune.predict_first import check_predict_first

        check_predict_first(args.predict_first, run_args, args.guided)
    if not run_args.search:  # a sweep's answer moves by whole stages: any higher answer is a step up
        precision = 0.0
    virtual = _virtual_load(args, run_args) if args.virtual else None
    ctx = TuneContext(
        serve_cmd=shlex.split(args.serve_cmd),
        run_argv=list(args.run_argv),
        out=out,
        health_timeout_s=parse_duration(args.health_timeout, "--health-timeout"),
        gpus=args.gpus,
        gpu_hourly_cost=args.gpu_hourly_cost,
        virtual=virtual,
    )
    plan = TunePlan(
        ctx,
        configs,
        args.guided,
        budget,
        run_args.search,
        DEFAULT_PRECISION if precision is None else precision,
    )
    if args.resume:
        from swarm.tune.resume import resumed

        plan.earlier = resumed(Path(args.resume), _setting(plan), args.resume_anyway)
        plan.previous = plan.earlier.done
    else:
        _fresh(out)
    plan.predict_first, plan.slo, plan.workload = args.predict_first, run_args.slo, run_args.workload
    return plan


def _virtual_load(args: argparse.Namespace, run_args: argparse.Namespace) -> VirtualLoad:
    """--virtual's load from the swarm run options (UsageError for what the virtual clock cannot
    run: a server other than the simulator, open loop, a search, a workload needing a tokenizer)."""
    from swarm.load.workloads import workload_draw
    from swarm.orchestrate.plan import plan_from_args as run_plan_from_args
    from swarm.orchestrate.run import run_options
    from swarm.orchestrate.virtual_run import VirtualLoad, sim_args_of

    if sim_args_of(shlex.split(args.serve_cmd)) is None:
        raise UsageError("--virtual steps the simulator's engine: --serve-cmd must run `swarm sim`")
    if args.predict_first is not None:
        raise UsageError("--virtual measures every configuration in seconds: leave out --predict-first")
    if not run_args.sweep or run_args.search or run_args.rate:
        raise UsageError("--virtual runs a closed-loop --sweep: give --sweep, not --search or --rate")
    run = run_plan_from_args(run_args, run_options())
    workload_draw(run.workload)  # one that needs the server's tokenizer: refused here
    return VirtualLoad(tuple(run.sweep), float(run.stage_time_s), float(run.warmup_s), run.workload, run.slo)


def _setting(plan: TunePlan) -> TuneSetting:
    """What this tune measures under (the configurations' names: for --guided, its starting one)."""
    from swarm.tune.results import TuneSetting

    names = [config_name(c) for c in plan.configs]
    return TuneSetting(
        plan.ctx.serve_cmd, plan.ctx.run_argv, names, plan.ctx.gpus, plan.ctx.gpu_hourly_cost, []
    )


def _fresh(out: Path) -> None:
    if (out / TUNE_JSON).exists():
        raise UsageError(
            f"--out {out} holds a tune already: --resume {out} to go on with it, or another --out"
        )


def main(args: argparse.Namespace) -> int:
    from swarm.tune.results import TuneResult
    from swarm.tune.run import Interrupted, sigterm_handed_on

    plan = plan_from_args(args)
    plan.ctx.out.mkdir(parents=True, exist_ok=True)
    setting = _setting(plan)
    result = TuneResult(
        serve_cmd=plan.ctx.serve_cmd,
        search=plan.search,
        slo=_slo(plan.ctx.run_argv),
        gpus=plan.ctx.gpus,
        gpu_hourly_cost=plan.ctx.gpu_hourly_cost,
        configs=[],
        run_argv=setting.run_argv,
        planned=setting.planned,
        earlier=plan.earlier.earlier if plan.earlier else [],
    )
    code = 0
    try:
        with sigterm_handed_on():
            if plan.guided:
                _guided(plan, result)
            elif plan.predict_first is not None:
                from swarm.tune.predict_first import PredictFirst, predict_first

                measure = lambda flags: _measured(plan, result, flags)  # noqa: E731
                pf = PredictFirst(
                    plan.ctx.out,
                    plan.ctx.serve_cmd,
                    plan.configs,
                    plan.predict_first,
                    plan.slo or "",
                    plan.workload or "",
                    measure,
                )
                predict_first(pf, result)
            else:
                for flags in plan.configs:
                    _measured(plan, result, flags)
    except Interrupted as e:
        result.configs.append(e.result)
        code = 130
    except KeyboardInterrupt:
        code = 130
    kept = {c.name for c in result.configs}  # --resume: earlier records this tune did not reach stay
    result.configs += [c for name, c in plan.previous.items() if name not in kept]
    _finish(plan, result)
    if code == 130:
        print(f"swarm tune: interrupted; what is done is in {plan.ctx.out / TUNE_JSON}", file=sys.stderr)
        return code
    return 0 if any(c.status == "ok" for c in result.configs) else 1


def _slo(run_argv: list[str]) -> str | None:
    for i, tok in enumerate(run_argv[:-1]):
        if tok == "--slo":
            return run_argv[i + 1]
    return None


def _measured(plan: TunePlan, result: TuneResult, flags: Flags) -> ConfigResult:
    """One configuration measured (or, with --resume, its earlier record), recorded and written."""
    from swarm.tune.results import write_tune_json
    from swarm.tune.run import measure

    name = config_name(flags)
    if name in plan.previous:
        under = any(name in e.configs for e in result.earlier)
        said = " under the earlier setting (--resume-anyway)" if under else " (--resume)"
        print(f"swarm tune: {name}: measured already{said}, skipped", flush=True)
        config = plan.previous[name]
    else:
        config = measure(plan.ctx, flags)
    result.configs.append(config)
    write_tune_json(plan.ctx.out / TUNE_JSON, result)
    print(f"swarm tune: {name}: {_said(config)}", flush=True)
    return config


def _said(config: ConfigResult) -> str:
    if config.status != "ok":  # the reason and the log tail hold the server's own text
        tail = f"\n{printable(config.log_tail, lines=True)}" if config.log_tail else ""
        return f"{config.status}: {printable(config.reason or 'no reason recorded')}{tail}"
    said = [] if config.answer is None else [f"answer {config.answer:g}"]
    said += [] if config.qps is None else [f"QPS {config.qps:.1f}"]
    said += [] if config.output_tok_s is None else [f"output {config.output_tok_s:.0f} tok/s"]
    held = f"bottleneck {config.bottleneck or 'none named'}" + (f": {config.why}" if config.why else "")
    return ", ".join([*said, held]) + (f"\n  ({config.note})" if config.note else "")


def _guided(plan: TunePlan, result: TuneResult) -> None:
    """From the first configuration, the flag the diagnosis points at, one step at a time, each
    printed as it happens; stops when the answer improves by less than the search's precision (a
    sweep's: when it reaches no higher stage), when no flag is left to try, or at the budget (saying
    what holds the last one and what would come next)."""
    from swarm.tune.advice import next_move
    from swarm.tune.plan import base_flags, family_of
    from swarm.tune.results import GuidedStep, write_tune_json

    family = family_of(plan.ctx.serve_cmd)
    flags = dict(plan.configs[0])
    current = _measured(plan, result, flags)
    _step(result, GuidedStep(current.name, None, "the starting point", None, current.answer), 1)
    tried = [{**base_flags(plan.ctx.serve_cmd), **flags}]
    while len(result.configs) < plan.budget:
        full = {**base_flags(plan.ctx.serve_cmd), **flags}
        move = next_move(family, full, current.bottleneck, tried=tried)
        if move.stop or move.flag is None or move.value is None:
            result.steps.append(GuidedStep(current.name, None, move.why, current.answer, None))
            print(f"swarm tune: stop: {move.why}", flush=True)
            break
        new = {**flags, move.flag: move.value}
        tried.append({**full, move.flag: move.value})
        got = _measured(plan, result, new)
        changed = f"{move.flag} {full.get(move.flag, 'unset') or 'set'} -> {move.value}"
        _step(
            result, GuidedStep(got.name, changed, move.why, current.answer, got.answer), len(result.configs)
        )
        write_tune_json(plan.ctx.out / TUNE_JSON, result)
        if got.status == "ok" and _better(current.answer, got.answer, plan.precision):
            current, flags = got, new
        elif got.status == "ok":
            why = (
                f"the answer improved by less than the search's precision ({plan.precision:.0%})"
                if plan.search
                else "the answer reached no higher sweep stage"
            )
            result.steps.append(GuidedStep(got.name, None, why, current.answer, got.answer))
            print(f"swarm tune: stop: {why}", flush=True)
            break
    else:  # the budget is spent: say what holds the last one and what would come next
        full = {**base_flags(plan.ctx.serve_cmd), **flags}
        move = next_move(family, full, current.bottleneck, tried=tried)
        after = "" if move.stop or move.flag is None else f"; next would be {move.flag} {move.value}"
        why = (
            f"the budget ({plan.budget} configurations) is spent; {current.name} is held by "
            f"{current.bottleneck or 'nothing the diagnosis named'}{after}"
        )
        result.steps.append(GuidedStep(current.name, None, why, current.answer, None))
        print(f"swarm tune: stop: {why}", flush=True)


def _better(before: float | None, after: float | None, precision: float) -> bool:
    if after is None:
        return False
    if before is None:
        return True
    return after > before * (1 + precision)


def _step(result: TuneResult, step: GuidedStep, number: int) -> None:
    result.steps.append(step)
    before = "none" if step.answer_before is None else f"{step.answer_before:g}"
    after = "none" if step.answer_after is None else f"{step.answer_after:g}"
    what = step.changed or step.config
    print(f"swarm tune: step {number}: {what}: {step.why}; answer {before} -> {after}", flush=True)


def _finish(plan: TunePlan, result: TuneResult) -> None:
    """tune.json with the best configuration, the table, tune.html, the best one's command."""
    from swarm.tune.report import write_tune_report
    from swarm.tune.results import best_config, table_text, write_tune_json

    best = best_config(result.configs, need_answer=result.slo is not None)
    result.best = best.name if best is not None else None
    write_tune_json(plan.ctx.out / TUNE_JSON, result)
    if not result.configs:
        return
    print(table_text(result))
    html = write_tune_report(plan.ctx.out, result)
    print(f"swarm tune: {len(result.configs)} configurations; {plan.ctx.out / TUNE_JSON}, report {html}")
    if best is not None:
        print(f"swarm tune: best: {best.name}; it starts with: {shlex.join(best.command)}")
