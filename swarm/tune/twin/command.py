"""`swarm twin`: a digital twin of the user's server, fitted from a measured run.

`swarm twin fit RUN_DIR [-o PROFILE.toml]` fits the simulator's engine to what the run's /metrics
scrapes and request records show (swarm/tune/twin/fit.py: each parameter's value, evidence, fit
quality, and what the run cannot determine refused by name) and writes the twin's profile.
`swarm twin predict PROFILE --grid KEY=V1,V2 --search concurrency --slo "ttft_p99<=800ms"
--workload W [--assume "decode_cost*0.6"] [--out DIR]` answers each configuration on the virtual
clock (swarm/tune/twin/predict.py) and prints swarm tune's table, with DIR/tune.json and
DIR/tune.html (Pareto chart) when --out is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

from swarm.core.errors import UsageError

PROGRESS_S = 5.0  # while a grid is predicted, a line on stderr at most this often
T = TypeVar("T")
R = TypeVar("R")


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="twin_command", metavar="{fit,predict}")
    fit = sub.add_parser("fit", help="fit a twin's profile to a measured run directory")
    fit.add_argument("run_dir", metavar="RUN_DIR", help="a swarm run --out directory (a sweep or a search)")
    fit.add_argument(
        "-o", "--out", metavar="PROFILE.toml", help="where to write the profile (default: RUN_DIR/twin.toml)"
    )
    pr = sub.add_parser("predict", help="answer configurations on the twin's virtual clock")
    pr.add_argument("profile", metavar="PROFILE", help="a twin profile written by swarm twin fit")
    pr.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a flag's values (repeatable; the cross product, as swarm tune --grid)",
    )
    pr.add_argument("--search", choices=("concurrency",), help="what to search: the most users (closed loop)")
    pr.add_argument("--slo", metavar="SPEC", help='the objective the answer meets: "ttft_p99<=800ms"')
    pr.add_argument("--workload", metavar="W", help="the requests, as swarm run --workload (e.g. short_qa)")
    pr.add_argument(
        "--assume",
        action="append",
        default=[],
        metavar="NAME*F|NAME=V",
        help='an effect no flag maps, e.g. "decode_cost*0.6" (quantisation); names: base_cost, '
        "decode_cost, prefill_cost, kv_cache_tokens, seq_state_tokens, max_num_seqs (repeatable)",
    )
    pr.add_argument("--out", metavar="DIR", help="write DIR/tune.json and DIR/tune.html (Pareto chart)")


def main(args: argparse.Namespace) -> int:
    if args.twin_command == "fit":
        return fit_main(Path(args.run_dir), Path(args.out) if args.out else None)
    if args.twin_command == "predict":
        return predict_main(args)
    raise UsageError("swarm twin: give fit RUN_DIR or predict PROFILE (see swarm twin --help)")


def fit_main(run_dir: Path, out: Path | None) -> int:
    from swarm.analysis.rundir import load_run
    from swarm.tune.twin.calibrate import fit_and_write
    from swarm.tune.twin.evidence import run_evidence
    from swarm.tune.twin.fit import fit_twin

    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a directory (give a swarm run --out directory)")
    ev = run_evidence(load_run(run_dir))
    path = out or run_dir / "twin.toml"
    fit = fit_and_write(ev, fit_twin(ev), path, str(run_dir))
    for p in fit.params.values():
        value = (
            "refused" if p.value is None else f"{p.value:g}" if isinstance(p.value, float) else str(p.value)
        )
        print(f"swarm twin: {p.name} = {value} [{p.status}] {p.evidence} ({p.quality})")
    print(f"swarm twin: profile in {path}")
    return 0


def ttft_limit(slo: str | None) -> float:
    """The TTFT p99 limit of an --slo: the one objective the twin predicts."""
    from swarm.stats import slo as slo_spec

    if not slo:
        raise UsageError('--slo is required: the objective the answer meets, e.g. "ttft_p99<=800ms"')
    objectives = slo_spec.parse(slo)
    wrong = [
        o.text
        for o in objectives
        if o.metric != "ttft_p99" or o.op not in ("<=", "<") or o.workload != "total"
    ]
    if wrong:
        raise UsageError(
            f"--slo {wrong[0]!r}: the twin predicts ttft_p99<=LIMIT only (the virtual clock's TTFT)"
        )
    return min(o.threshold for o in objectives)


def with_progress(
    items: Sequence[T],
    one: Callable[[T], R],
    *,
    every_s: float = PROGRESS_S,
    clock: Callable[[], float] = time.monotonic,
    out: TextIO | None = None,
) -> list[R]:
    """`one` of each item in order; while they take longer than `every_s`, a line at most that often
    on stderr: how many are done, the time so far and about how much is left."""
    out = out or sys.stderr
    t0 = last = clock()
    done: list[R] = []
    for i, item in enumerate(items, 1):
        done.append(one(item))
        now = clock()
        if i < len(items) and now - last >= every_s:
            left = (now - t0) / i * (len(items) - i)
            print(
                f"swarm twin: {i} of {len(items)} configurations predicted in {now - t0:.0f} s; "
                f"about {left:.0f} s left",
                file=out,
                flush=True,
            )
            last = now
    return done


def predict_main(args: argparse.Namespace) -> int:
    from swarm.core.runfiles import TUNE_JSON
    from swarm.load.workloads import workload_draw
    from swarm.tune.plan import check_distinct, config_name, grid_configs, parse_grid
    from swarm.tune.report import write_tune_report
    from swarm.tune.results import TuneResult, best_config, table_text, write_tune_json
    from swarm.tune.twin.predict import parse_assumptions, predict
    from swarm.tune.twin.profile import read_twin

    if args.search != "concurrency":
        raise UsageError("--search concurrency is required: the twin searches the most users meeting the SLO")
    if not args.workload:
        raise UsageError("--workload is required: the requests the fitted run sent, e.g. short_qa")
    limit = ttft_limit(args.slo)
    assumptions = parse_assumptions(args.assume)
    twin = read_twin(Path(args.profile))
    configs = grid_configs(parse_grid(args.grid))
    check_distinct(configs, "--grid")
    draw = workload_draw(args.workload)
    predictions = with_progress(configs, lambda f: predict(twin, config_name(f), f, assumptions, draw, limit))
    result = TuneResult(
        serve_cmd=["swarm", "twin", "predict", args.profile],
        search="concurrency",
        slo=args.slo,
        gpus=1,
        gpu_hourly_cost=None,
        configs=[p.config for p in predictions],
    )
    best = best_config(result.configs, need_answer=True)
    result.best = best.name if best else None
    print(table_text(result))
    for p in predictions:
        if p.notes:
            print(f"swarm twin: {p.config.name}: {'; '.join(p.notes)}")
    if args.out:
        out = Path(args.out)
        write_tune_json(out / TUNE_JSON, result)
        print(f"swarm twin: predictions in {out / TUNE_JSON}, report {write_tune_report(out, result)}")
    sys.stdout.flush()
    if not any(c.status == "ok" for c in result.configs):
        print("swarm twin: no configuration could be predicted (each row says why)", file=sys.stderr)
        return 1
    return 0
