"""A twin held to its own run: fitted, then checked against the run it was fitted from.

Each parameter of `swarm/tune/twin/fit.py` comes from one view of the run (the ITL against the batch,
the prefill time at low load, the cap, the time outside the engine); nothing there checks that the
engine they make together answers the run's own load as the server did. Here the twin runs the
fitted run's highest closed-loop load at its own flags on the virtual clock, and where its QPS lies
outside the measured one's 95% interval (the run's own; else +/- 2 / sqrt(completions)), the fixed
cost every step pays (`step.base_s`: the weights read, the scheduler; the line's intercept, which
the low-load stages pull) is scaled until the twin answers that stage as measured. (Against vLLM's
CPU build, runs fitted at --max-num-seqs 4 then predicting 2 and 8: scaling the fixed cost held both
within 16%; scaling the per-sequence or the prefill cost instead erred by up to 23% at 8.) The
factor and the QPS before and after are written in the parameter's evidence; a twin that cannot be matched keeps its fit, with why.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from swarm.core.errors import UsageError
from swarm.load.workloads import workload_draw
from swarm.stats.confidence import Z
from swarm.tune.twin.fit import REFUSED, RunEvidence, TwinFit
from swarm.tune.twin.predict import configure_profile, level_result, parse_assumptions
from swarm.tune.twin.profile import read_twin, write_twin

FACTOR_RANGE = (0.25, 4.0)  # the fixed step cost is scaled within this range, no further
KNOB = "step.base_s"  # the parameter scaled
KNOB_ASSUME = "base_cost"  # its --assume name (how the twin's profile is scaled for a trial)
STEPS = 10  # bisection steps in log space (the factor to within ~1.5%)


def fit_and_write(ev: RunEvidence, fit: TwinFit, path: Path, run: str) -> TwinFit:
    """`fit` written to `path`, calibrated against the run's own highest load (rewritten when it is)."""
    write_twin(path, fit, run)
    calibrated = calibrate(ev, fit, path)
    if calibrated is not fit:
        write_twin(path, calibrated, run)
    return calibrated


def calibrate(ev: RunEvidence, fit: TwinFit, path: Path) -> TwinFit:
    """`fit` with step.base_s scaled so the twin (read back from `path`) answers the run's highest
    closed-loop stage with its measured QPS; the evidence says how, or why not."""
    knob = fit.params.get(KNOB)
    loaded = [s for s in ev.stages if s.users and s.qps]
    if knob is None or knob.status == REFUSED or not knob.value or not loaded:
        return fit
    top = max(loaded, key=lambda s: s.users or 0)
    users, target = int(top.users or 0), float(top.qps or 0.0)
    twin = read_twin(path)
    try:
        draw = workload_draw(",".join(fit.workloads)) if fit.workloads else None
    except UsageError:
        draw = None
    if draw is None:
        return _noted(
            fit, "; not checked against the run's own load (its workload is not a built-in prompt set)"
        )

    def qps(factor: float) -> float:
        profile = configure_profile(twin, {}, parse_assumptions([f"{KNOB_ASSUME}*{factor:.6g}"]))
        return level_result(twin, profile, users, draw).qps

    try:
        before = qps(1.0)
    except UsageError as e:  # a refused parameter the engine needs (a cap never reached)
        return _noted(fit, f"; not checked against the run's own load: {e}")
    low, high, how = _interval(top.qps_ci, target, top.completed)
    if low <= before <= high:
        return _noted(
            fit,
            f"; checked: the twin answers the run's own {users} users with {before:.2f} QPS, inside the measured "
            f"{target:.2f} [{low:.2f}, {high:.2f}] ({how})",
        )
    lo, hi = FACTOR_RANGE
    if qps(lo) < target or qps(hi) > target:
        return _noted(
            fit,
            f"; the twin answers the run's own {users} users with {before:.2f} QPS, measured {target:.2f}, and no "
            f"fixed step cost x{lo:g} to x{hi:g} matches it: kept as fitted",
        )
    for _ in range(STEPS):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if qps(mid) > target else (lo, mid)
    factor = math.sqrt(lo * hi)
    after = qps(factor)
    return _replaced(
        fit,
        value=round(float(knob.value) * factor, 8),
        evidence=(
            f"{knob.evidence}; calibrated x{factor:.2f} (from {float(knob.value) * 1000:.3f} ms) so the twin "
            f"answers the run's own {users} users as measured: {after:.2f} QPS against {target:.2f} "
            f"(uncalibrated {before:.2f}, outside [{low:.2f}, {high:.2f}], {how})"
        ),
        quality=f"{knob.quality}; calibrated on the run's highest load",
    )


def _interval(ci: tuple[float, float] | None, qps: float, completed: int) -> tuple[float, float, str]:
    """(low, high, where from) of the measured QPS: the run's own 95% interval, else a count's."""
    if ci is not None:
        return ci[0], ci[1], "the run's 95% interval"
    half = Z / math.sqrt(completed) if completed else 1.0  # a count's: QPS x (1 +/- z / sqrt(completions))
    return qps * (1.0 - half), qps * (1.0 + half), f"+/- {Z:.2f}/sqrt({completed} completions)"


def _noted(fit: TwinFit, note: str) -> TwinFit:
    return _replaced(fit, evidence=fit.params[KNOB].evidence + note)


def _replaced(fit: TwinFit, **changes: object) -> TwinFit:
    """`fit` with the scaled parameter's fields changed."""
    return dataclasses.replace(
        fit, params={**fit.params, KNOB: dataclasses.replace(fit.params[KNOB], **changes)}
    )
