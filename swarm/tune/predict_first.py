"""`swarm tune --predict-first K`: measure the base configuration, fit a twin to its run, predict the
whole grid on the twin's virtual clock, and measure only the K best predictions for real.

Each measured configuration is printed with its prediction and the error (measured against
predicted answer); tune.json keeps them (`TuneResult.predictions`). A configuration the twin cannot
predict (a flag it maps to nothing, a parameter it refused and nothing gives) is printed with why
and not measured: it cannot be ranked.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swarm.core.errors import UsageError
from swarm.tune.plan import Flags, base_flags, config_name

if TYPE_CHECKING:
    from swarm.tune.results import ConfigResult, TuneResult
    from swarm.tune.twin.predict import Prediction

# the base command's flags the twin takes when its fit could not see them (a cap never reached)
CAP_FLAGS = ("--max-num-seqs", "-np", "--parallel")


@dataclass(frozen=True)
class PredictFirst:
    """What --predict-first needs of the tune: where it writes, the base command, the grid, the K, the
    SLO and workload of its runs, and how one configuration is measured (tune's own, recorded)."""

    out: Path
    serve_cmd: list[str]
    configs: Sequence[Flags]
    k: int
    slo: str
    workload: str
    measure: Callable[[Flags], ConfigResult]


def check_predict_first(k: int, run_args: argparse.Namespace, guided: bool) -> None:
    """--predict-first's needs, checked before any server starts."""
    from swarm.tune.twin.command import ttft_limit

    if k < 1:
        raise UsageError("--predict-first K: K must be >= 1")
    if guided:
        raise UsageError("--predict-first and --guided both choose what to measure: give one")
    if run_args.search != "concurrency":
        raise UsageError("--predict-first needs --search concurrency: the twin predicts the most users")
    if not run_args.workload:
        raise UsageError("--predict-first needs --workload: the twin draws the same requests")
    ttft_limit(run_args.slo)


def _base_cap(serve_cmd: list[str]) -> Flags:
    return {f: v for f, v in base_flags(serve_cmd).items() if f in CAP_FLAGS}


def _predict_all(pf: PredictFirst, base: ConfigResult) -> tuple[list[tuple[Flags, Prediction]], list[str]]:
    from swarm.analysis.rundir import load_run
    from swarm.load.workloads import workload_draw
    from swarm.tune.twin.calibrate import fit_and_write
    from swarm.tune.twin.command import ttft_limit
    from swarm.tune.twin.evidence import run_evidence
    from swarm.tune.twin.fit import REFUSED, fit_twin
    from swarm.tune.twin.predict import predict
    from swarm.tune.twin.profile import read_twin

    if base.status != "ok" or base.run_dir is None:
        raise UsageError(
            f"--predict-first: the base configuration was not measured ({base.reason}); no twin to fit"
        )
    path = pf.out / "twin.toml"
    ev = run_evidence(load_run(Path(base.run_dir)))
    fit = fit_and_write(ev, fit_twin(ev), path, base.run_dir)
    print(f"swarm tune: twin fitted from the base configuration's run: {path}", flush=True)
    twin = read_twin(path)
    cap = _base_cap(pf.serve_cmd) if fit.params["engine.max_num_seqs"].status == REFUSED else {}
    draw, limit = workload_draw(pf.workload), ttft_limit(pf.slo)
    ranked, skipped = [], []
    for flags in pf.configs:
        try:
            ranked.append((flags, predict(twin, config_name(flags), cap | flags, [], draw, limit)))
        except UsageError as e:
            skipped.append(f"{config_name(flags)}: not predicted ({e}); not measured")
    ranked.sort(key=lambda fp: fp[1].config.answer or 0.0, reverse=True)
    return ranked, skipped


def predict_first(pf: PredictFirst, result: TuneResult) -> None:
    """Base measured, the grid predicted, the K best measured; predicted against measured printed."""
    from swarm.tune.results import PredictedMeasured, prediction_error

    base = pf.measure({})
    ranked, skipped = _predict_all(pf, base)
    for line in skipped:
        print(f"swarm tune: {line}", flush=True)
    for _, p in ranked:
        notes = f" ({'; '.join(p.notes)})" if p.notes else ""
        print(f"swarm tune: predicted {p.config.name}: answer {_num(p.config.answer)}{notes}", flush=True)
    for flags, p in ranked[: pf.k]:
        measured = pf.measure(flags)
        record = PredictedMeasured(
            config=p.config.name,
            predicted=p.config.answer,
            measured=measured.answer if measured.status == "ok" else None,
            error=prediction_error(p.config.answer, measured.answer if measured.status == "ok" else None),
            notes=list(p.notes),
        )
        result.predictions.append(record)
        err = "-" if record.error is None else f"{100 * record.error:+.1f}%"
        print(
            f"swarm tune: {p.config.name}: predicted {_num(record.predicted)}, measured "
            f"{_num(record.measured)} (error {err})",
            flush=True,
        )


def _num(v: float | None) -> str:
    return "none" if v is None else f"{v:g}"
