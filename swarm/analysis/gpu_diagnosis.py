"""What the GPUs say about a run's ceiling (pure functions over `gpu_metrics.gpu_stage_stats`).

Judged at the ceiling stage (swarm/analysis/ceiling.py `ceiling`), else at the last stage (the
most load the run offered):
- gpu_busy: every GPU averaged >= GPU_BUSY utilisation: compute-bound, as the GPUs themselves say;
- gpu_headroom: the busiest GPU averaged < GPU_BUSY: whatever held throughput there, it was not
  GPU compute (the scheduler, KV cache, CPU, network or the client: see the other findings); a
  server-side compute_bound finding (swarm/analysis/bottleneck.py) is then said to be unconfirmed;
and in any stage:
- gpu_idle: a GPU averaged < GPU_IDLE while another averaged >= GPU_ACTIVE: named (host, index,
  UUID), the first stage it happens in; usually a placement problem (tensor/data parallel size,
  CUDA_VISIBLE_DEVICES, a replica that receives no traffic).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swarm.analysis.ceiling import ceiling
from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.gpu_metrics import GpuWindow
from swarm.core.units import percent_text

GPU_BUSY = 0.90  # DCGM_FI_DEV_GPU_UTIL averaged over a stage: a kernel ran this share of the time
GPU_ACTIVE = 0.50  # a GPU doing real work
GPU_IDLE = 0.10  # a GPU doing next to nothing


def _util_range(gpus: Sequence[GpuWindow]) -> str:
    utils = [g.util_mean for g in gpus if g.util_mean is not None]
    lo, hi = min(utils), max(utils)
    return percent_text(lo) if abs(hi - lo) < 0.005 else f"{percent_text(lo)}-{percent_text(hi)}"


def _extras(gpus: Sequence[GpuWindow]) -> str:
    parts = []
    sm = [g.sm_active_mean for g in gpus if g.sm_active_mean is not None]
    if sm:
        parts.append(f"SM active {percent_text(sum(sm) / len(sm))} on average")
    power = [g.power_mean_w for g in gpus if g.power_mean_w is not None]
    if power:
        parts.append(f"{sum(power):,.0f} W in all")
    temp = [g.temp_max_c for g in gpus if g.temp_max_c is not None]
    if temp:
        parts.append(f"up to {max(temp):.0f} °C")
    return f" ({', '.join(parts)})" if parts else ""


def gpu_name(g: GpuWindow) -> str:
    extra = ", ".join(x for x in (g.model, g.uuid) if x)
    return f"{g.name}" + (f" ({extra})" if extra else "")


def gpu_findings(
    rows: Sequence[StageRow], gpus: Mapping[int, Sequence[GpuWindow]], others: Sequence[Finding] = ()
) -> list[Finding]:
    """gpu_busy / gpu_headroom at the ceiling (else the last stage), then gpu_idle (first stage).
    `others`: the run's other findings (a compute_bound one is weighed against the GPUs)."""
    out: list[Finding] = []
    rows = sorted(rows, key=lambda r: r.stage)
    measured = [r for r in rows if any(g.util_mean is not None for g in gpus.get(r.stage, ()))]
    if not measured:
        return out
    found = ceiling(rows)
    at = found[0] if found is not None and found[0] in measured else measured[-1]
    where = "the ceiling" if found is not None and at is found[0] else "the highest load"
    stage_gpus = [g for g in gpus[at.stage] if g.util_mean is not None]
    n = len(stage_gpus)
    if all((g.util_mean or 0.0) >= GPU_BUSY for g in stage_gpus):
        out.append(
            Finding(
                "gpu_busy",
                at.stage,
                f"At {at.label} ({where}) the GPUs were busy: {n} GPU{'s' if n > 1 else ''} at "
                f"{_util_range(stage_gpus)} utilisation{_extras(stage_gpus)}: compute-bound, as the GPUs "
                f"themselves report; more throughput needs faster kernels (quantisation, speculative "
                f"decoding) or more GPUs.",
            )
        )
    elif max(g.util_mean or 0.0 for g in stage_gpus) < GPU_BUSY:
        out.append(
            Finding(
                "gpu_headroom",
                at.stage,
                f"At {at.label} ({where}) the GPUs had headroom: {n} GPU{'s' if n > 1 else ''} at "
                f"{_util_range(stage_gpus)} utilisation{_extras(stage_gpus)}: what held throughput "
                f"there was not GPU compute"
                + (
                    " (the server-side compute-bound reading is not confirmed by the GPUs)."
                    if any(f.kind == "compute_bound" for f in others)
                    else "."
                ),
            )
        )
    for r in measured:
        stage_gpus = [g for g in gpus[r.stage] if g.util_mean is not None]
        busy = [g for g in stage_gpus if (g.util_mean or 0.0) >= GPU_ACTIVE]
        idle = [g for g in stage_gpus if (g.util_mean or 0.0) < GPU_IDLE]
        if busy and idle:
            names = "; ".join(f"{gpu_name(g)} at {percent_text(g.util_mean)}" for g in idle)
            out.append(
                Finding(
                    "gpu_idle",
                    r.stage,
                    f"At {r.label} {len(idle)} GPU{'s were' if len(idle) > 1 else ' was'} idle while "
                    f"{len(busy)} other{'s' if len(busy) > 1 else ''} worked at {_util_range(busy)}: "
                    f"{names}. Check the server's tensor/data-parallel size, CUDA_VISIBLE_DEVICES and "
                    f"that every replica receives traffic.",
                )
            )
            break
    return out
