"""`swarm tune`'s results (pure records and maths; reading one configuration's run directory).

A tune measures one server configuration per `swarm run` (swarm/tune/command.py starts the server and
the run); this module turns each run directory into a `ConfigResult` (`config_from_run`), prices it
(cost per million output tokens, per thousand requests), finds the Pareto front of every probed point
and the best configuration, prints the console table and keeps the whole tune in `tune.json`.

The figures "at the answer" come from one stage of the configuration's run: the search's answer stage
(its QPS and TTFT p99 the ones the search judged there, the rest from the stage's block); in a sweep,
the highest-load stage meeting the run's SLO (its load is then the configuration's answer, the next
load the bracket's failing end), else the stage with the most QPS.

Per-user speed (`ProbePoint.output_tok_s_per_user`, the x axis of the Pareto chart, vLLM's
`plot_pareto` "tokens/s/user") is 1 / the stage's mean TPOT: the output tokens per second one stream
receives once its first token came. It reads the same for closed-loop and open-loop stages and does not
depend on think time or on how many users the load generator counted; a stage without TPOT (one-token
answers) falls back to its output tokens/s over its users.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from swarm.analysis.table import align
from swarm.core.errors import UsageError
from swarm.core.runfiles import DIAGNOSIS, SUMMARY
from swarm.core.terminal import printable
from swarm.core.units import ms_number
from swarm.stats import slo as slo_spec
from swarm.stats import summary as summary_file

# the diagnosis' kinds that name what held the load (analysis/bottleneck.py, client_bound.py, ttft_gap.py),
# in the order `bottleneck.cause_at` tests them: the first one found is the configuration's bottleneck
BOTTLENECK_KINDS = (
    "client_bound",
    "kv_bound",
    "max_num_seqs_cap",
    "frontend_bound",
    "outside_engine",
    "compute_bound",
    "network_delay",
    "no_saturation",
    "no_server_metrics",
)


@dataclass(frozen=True)
class ProbePoint:
    """One measured stage of one configuration's run."""

    users: int | None  # closed loop; None for rate stages
    rate: float | None  # open loop req/s; None for concurrency stages
    qps: float
    output_tok_s: float  # whole-server output tokens/s in that stage
    output_tok_s_per_user: float  # 1 / mean TPOT: see the module's docstring
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    met_slo: bool | None  # None when there is no SLO


@dataclass
class ConfigResult:
    """One server configuration of a tune: its flags, the exact command, and what the run found."""

    name: str  # "max-num-seqs=64 gpu-memory-utilization=0.90"; "base" without flags
    flags: dict[str, str]  # the flags added to the base command, as written: {"--max-num-seqs": "64"}
    command: list[str]  # the exact argv that started the server (the port included)
    status: str  # "ok" | "failed" | "interrupted" | "invalid" (a twin's prediction it cannot make)
    reason: str | None = None  # why it failed
    log_tail: str | None = None  # the server log's last lines when it failed
    run_dir: str | None = None  # that configuration's swarm run --out directory
    answer: float | None = None  # users or req/s meeting the SLO; None if none / no SLO
    bracket: tuple[float, float] | None = None
    qps: float | None = None  # at the answer (or at the best stage of a sweep)
    output_tok_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    bottleneck: str | None = None  # the diagnosis' kind at the answer / ceiling
    why: str | None = None  # the diagnosis' sentence for it
    points: list[ProbePoint] = field(default_factory=list)
    cost_per_m_output_tokens: float | None = None
    cost_per_k_requests: float | None = None
    note: str | None = None  # the guardian's line when the serve command left its server running


@dataclass
class GuidedStep:
    """One step of `--guided`: the configuration measured, the flag changed to get there and why."""

    config: str  # the ConfigResult.name measured in this step
    changed: str | None  # "--max-num-seqs 64 -> 256"; None for the starting point
    why: str  # why this flag was changed (tune_advice), or why the loop stopped
    answer_before: float | None
    answer_after: float | None


@dataclass
class PredictedMeasured:
    """`swarm tune --predict-first`: one configuration's answer as the twin predicted it and as measured."""

    config: str  # the ConfigResult.name
    predicted: float | None
    measured: float | None
    error: float | None  # (predicted - measured) / measured; None when either is missing
    notes: list[str] = field(default_factory=list)  # the prediction's assumptions and extrapolations


def prediction_error(predicted: float | None, measured: float | None) -> float | None:
    """(predicted - measured) / measured: +0.1 is a prediction 10% above what was measured."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured


@dataclass
class TuneSetting:
    """What a tune's configurations were measured under (tune.json's `earlier`: a `--resume-anyway`
    went on under another one, and these configurations' records came from this one)."""

    serve_cmd: list[str]
    run_argv: list[str] | None  # the swarm run options handed on; None: an older tune.json's, unknown
    planned: list[str] | None  # the configurations' names it planned; None likewise
    gpus: int
    gpu_hourly_cost: float | None
    configs: list[str]  # the names of the configurations measured under it


@dataclass
class TuneResult:
    """A whole tune (tune.json). `serve_cmd`, `run_argv`, `planned`, `gpus` and `gpu_hourly_cost` are
    what its configurations were measured under, but for those named in `earlier`."""

    serve_cmd: list[str]  # the base command
    search: str | None  # "concurrency" | "rate" | "knee" | None (a given sweep)
    slo: str | None
    gpus: int
    gpu_hourly_cost: float | None
    configs: list[ConfigResult]
    steps: list[GuidedStep] = field(default_factory=list)  # guided mode only
    best: str | None = None  # ConfigResult.name of the best configuration for the SLO
    predictions: list[PredictedMeasured] = field(default_factory=list)  # --predict-first only
    run_argv: list[str] | None = None  # the swarm run options handed on (None: not recorded)
    planned: list[str] | None = None  # the names of the configurations planned (None: not recorded)
    earlier: list[TuneSetting] = field(default_factory=list)  # --resume-anyway: see TuneSetting


# ---------------------------------------------------------------------------------------- one run


def config_from_run(
    name: str,
    flags: dict[str, str],
    command: list[str],
    run_dir: Path,
    *,
    gpus: int = 1,
    gpu_hourly_cost: float | None = None,
) -> ConfigResult:
    """An "ok" ConfigResult from a finished `swarm run` directory (summary.json, and diagnosis.json when
    the run's report wrote one; otherwise the diagnosis is run on the loaded directory)."""
    run_dir = Path(run_dir)
    summary = summary_file.load(run_dir / SUMMARY)
    search = summary.get("search") if isinstance(summary.get("search"), Mapping) else None
    slo_text = _summary_slo(summary)
    entries = [e for e in summary.get("stages") or [] if isinstance(e.get("total"), Mapping)]
    probed = {p.get("stage") for p in (search or {}).get("probes") or []}
    if probed:  # a search's stages after its end (the stop) are no measurement
        entries = [e for e in entries if e["stage"] in probed]
    verdicts = _stage_verdicts(entries, search, slo_text)
    judged = {p.get("stage"): p for p in (search or {}).get("probes") or []}
    points = [_point(e, verdicts.get(e["stage"]), judged.get(e["stage"])) for e in entries]
    out = ConfigResult(name, dict(flags), list(command), "ok", run_dir=str(run_dir), points=points)
    stage, out.answer, out.bracket = _answer(entries, search, verdicts)
    if stage is not None:
        block = stage["total"]
        out.qps = block.get("qps")
        out.output_tok_s = block.get("output_tok_s")
        out.ttft_p99_s = (block.get("ttft_s") or {}).get("p99")
        out.tpot_p99_s = (block.get("tpot_s") or {}).get("p99")
        if search and search.get("answer_stage") == stage["stage"]:  # the figures the search judged
            out.qps = search.get("qps") if search.get("qps") is not None else out.qps
            out.ttft_p99_s = (
                search.get("ttft_p99_s") if search.get("ttft_p99_s") is not None else out.ttft_p99_s
            )
    out.bottleneck, out.why = _bottleneck(run_dir, search, stage["stage"] if stage else None)
    if gpu_hourly_cost is not None:
        if out.output_tok_s:
            out.cost_per_m_output_tokens = cost_per_million_output_tokens(
                out.output_tok_s, gpus, gpu_hourly_cost
            )
        if out.qps:
            out.cost_per_k_requests = cost_per_thousand_requests(out.qps, gpus, gpu_hourly_cost)
    return out


def _summary_slo(summary: Mapping[str, Any]) -> str | None:
    parts = [
        v.get("objective") for v in summary.get("slo") or [] if isinstance(v, Mapping) and v.get("objective")
    ]
    return ",".join(parts) if parts else None


def _stage_verdicts(
    entries: Sequence[Mapping[str, Any]], search: Mapping[str, Any] | None, slo_text: str | None
) -> dict[int, bool | None]:
    """Stage -> met the SLO: the search's own verdict for its probes, else the SLO judged on the
    stage's block; nothing without an SLO."""
    out: dict[int, bool | None] = {}
    if search and search.get("mode") != "knee":
        out = {int(p["stage"]): p.get("ok") for p in search.get("probes") or [] if p.get("stage") is not None}
    if slo_text:
        try:
            objectives = slo_spec.parse(slo_text)
        except UsageError:
            objectives = []
        for e in entries:
            if e["stage"] not in out and objectives:
                out[e["stage"]] = all(v.ok for v in slo_spec.evaluate(objectives, e))
    return out


def per_user_tok_s(block: Mapping[str, Any], users: int | None) -> float:
    """Output tokens/s of one stream: 1 / mean TPOT; without it, output tokens/s over the users."""
    tpot = (block.get("tpot_s") or {}).get("mean")
    if tpot:
        return 1.0 / tpot
    return float(block.get("output_tok_s") or 0.0) / users if users else 0.0


def _point(entry: Mapping[str, Any], met: bool | None, probe: Mapping[str, Any] | None = None) -> ProbePoint:
    """One stage as a point. A search probe's QPS and TTFT p99 are the ones its verdict (`met`) was
    judged on (its settled window), so the point never shows a p99 over the SLO marked as meeting it;
    the other figures are the stage's block."""
    block = entry["total"]
    rate = entry.get("rate")
    users = None if rate is not None else entry.get("users")
    qps = (probe or {}).get("qps")
    ttft_p99 = (probe or {}).get("ttft_p99")
    return ProbePoint(
        users=users,
        rate=rate,
        qps=float(qps if qps is not None else block.get("qps") or 0.0),
        output_tok_s=float(block.get("output_tok_s") or 0.0),
        output_tok_s_per_user=per_user_tok_s(block, entry.get("users")),
        ttft_p99_s=ttft_p99 if ttft_p99 is not None else (block.get("ttft_s") or {}).get("p99"),
        tpot_p99_s=(block.get("tpot_s") or {}).get("p99"),
        met_slo=met,
    )


def _load(entry: Mapping[str, Any]) -> float | None:
    """A stage's load: its rate (open loop) or its users (closed loop)."""
    rate = entry.get("rate")
    return (
        float(rate)
        if rate is not None
        else (float(entry["users"]) if entry.get("users") is not None else None)
    )


def _answer(
    entries: Sequence[Mapping[str, Any]],
    search: Mapping[str, Any] | None,
    verdicts: Mapping[int, bool | None],
) -> tuple[Mapping[str, Any] | None, float | None, tuple[float, float] | None]:
    """(the stage at the answer, the answer, its bracket): see the module's docstring."""
    if not entries:
        return None, None, None
    by_stage = {e["stage"]: e for e in entries}
    if search is not None:
        answer = search.get("answer")
        lo, hi = [*(search.get("bracket") or []), None, None][:2]
        bracket = (float(lo), float(hi)) if lo is not None and hi is not None else None
        stage = by_stage.get(search.get("answer_stage"))
        if stage is None and answer is not None:
            stage = next((e for e in reversed(entries) if _load(e) == float(answer)), None)
        if stage is not None or answer is not None:
            return stage, None if answer is None else float(answer), bracket
    passing = [e for e in entries if verdicts.get(e["stage"]) and _load(e) is not None]
    if passing:
        top = max(passing, key=lambda e: (_load(e), e["stage"]))
        load = float(_load(top) or 0.0)
        above = sorted(
            x for e in entries if not verdicts.get(e["stage"]) and (x := _load(e)) is not None and x > load
        )
        return top, load, (load, above[0]) if above else None
    best = max(entries, key=lambda e: (e["total"].get("qps") or 0.0, -e["stage"]))
    return best, None, None


def _bottleneck(
    run_dir: Path, search: Mapping[str, Any] | None, stage: int | None
) -> tuple[str | None, str | None]:
    """(kind, sentence) of what held the load: at a search's answer the diagnosis' cause there (the
    search block's `why_kind` / `why`, else analysis/search.py on the loaded run); else diagnosis.json's (or the diagnosis run now) first bottleneck finding,
    the one at `stage` first."""
    from swarm.analysis import rundir

    if search is not None and search.get("why_kind"):  # swarm run said it at the search's end
        return str(search["why_kind"]), search.get("why")
    data = None  # the run, loaded once where needed
    if search is not None and search.get("mode") != "knee" and search.get("probes"):
        from swarm.analysis.search import bottleneck

        data = rundir.load_run(run_dir)
        found = bottleneck(data)
        if found is not None:
            return found.kind, found.text
    path = run_dir / DIAGNOSIS
    if path.exists():
        findings = [(f.get("kind"), f.get("stage"), f.get("text")) for f in json.loads(path.read_text())]
    else:
        data = rundir.load_run(run_dir) if data is None else data
        findings = [(f.kind, f.stage, f.text) for f in rundir.findings(data)]
    return pick_bottleneck(findings, stage)


def pick_bottleneck(
    findings: Sequence[tuple[Any, Any, Any]], stage: int | None
) -> tuple[str | None, str | None]:
    """The bottleneck among (kind, stage, text) findings: a BOTTLENECK_KINDS one, at `stage` first,
    then in BOTTLENECK_KINDS' order; (None, None) when none names one."""
    held = [f for f in findings if f[0] in BOTTLENECK_KINDS]
    if not held:
        return None, None
    chosen = min(held, key=lambda f: (f[1] != stage or stage is None, BOTTLENECK_KINDS.index(f[0])))
    return str(chosen[0]), None if chosen[2] is None else str(chosen[2])


# ---------------------------------------------------------------------------------------- cost, front, best


def cost_per_million_output_tokens(output_tok_s: float, gpus: int, gpu_hourly_cost: float) -> float:
    """What a million output tokens cost at this rate: gpus x hourly / (tokens/s x 3600) x 1e6."""
    return gpus * gpu_hourly_cost / (output_tok_s * 3600.0) * 1e6


def cost_per_thousand_requests(qps: float, gpus: int, gpu_hourly_cost: float) -> float:
    """What a thousand requests cost at this rate: gpus x hourly / (QPS x 3600) x 1000."""
    return gpus * gpu_hourly_cost / (qps * 3600.0) * 1000.0


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices (ascending) of the points no other point dominates (more is better on both axes; a point
    dominates another when it is at least as good on both and better on one; equal points all stay)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any(ox >= x and oy >= y and (ox > x or oy > y) for ox, oy in points):
            front.append(i)
    return front


def best_config(configs: Sequence[ConfigResult], *, need_answer: bool = False) -> ConfigResult | None:
    """The "ok" configuration with the highest answer (one without an answer ranks below any; with
    `need_answer`, an SLO's, it is never best: it met the SLO at no load); ties: more output tokens/s.
    None when no configuration finished."""
    ok = [c for c in configs if c.status == "ok" and (c.answer is not None or not need_answer)]
    if not ok:
        return None
    return max(ok, key=lambda c: (c.answer is not None, c.answer or 0.0, c.output_tok_s or 0.0))


# ---------------------------------------------------------------------------------------- table


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{int(v)}" if v == int(v) else f"{v:g}"


def answer_text(c: ConfigResult) -> str:
    """ "212 (208-216)", "212", or "-"."""
    if c.answer is None:
        return "-"
    return _num(c.answer) + (f" ({_num(c.bracket[0])}-{_num(c.bracket[1])})" if c.bracket else "")


def table_text(result: TuneResult) -> str:
    """The console table: one row per configuration (a failed one shows its reason), the best marked."""
    priced = result.gpu_hourly_cost is not None
    head = ["config", "status", "answer (bracket)", "QPS", "output tok/s", "TTFT p99 (ms)", "TPOT p99 (ms)"]
    head += ["bottleneck"] + (["$/M tok"] if priced else [])
    predicted = {p.config: p for p in result.predictions}
    if predicted:
        head.append("predicted (error)")
    rows = []
    for c in result.configs:
        name = c.name + (" *" if c.name == result.best else "")
        if c.status != "ok":
            rows.append([name, c.status, printable(c.reason or "-"), *["" for _ in head[3:]]])
            continue
        cells = [
            name,
            c.status,
            answer_text(c),
            "-" if c.qps is None else f"{c.qps:.2f}",
            "-" if c.output_tok_s is None else f"{c.output_tok_s:.0f}",
            ms_number(c.ttft_p99_s),
            ms_number(c.tpot_p99_s),
            c.bottleneck or "-",
        ]
        if priced:
            cells.append("-" if c.cost_per_m_output_tokens is None else f"{c.cost_per_m_output_tokens:.2f}")
        if predicted:
            cells.append(_predicted_text(predicted.get(c.name)))
        rows.append(cells)
    lines = [line.rstrip() for line in align(head, rows)]
    if result.best:
        lines.append(f"* best for {'the SLO' if result.slo else 'its load'}: {result.best}")
    for e in result.earlier:  # --resume-anyway: what they were measured under is in tune.json
        lines.append(
            f"measured under an earlier setting (tune.json's earlier): {', '.join(e.configs) or 'none'}"
        )
    return "\n".join(lines)


def _predicted_text(p: PredictedMeasured | None) -> str:
    """ "197 (+3.7%)" for a --predict-first configuration, "-" for one the twin did not predict."""
    if p is None or p.predicted is None:
        return "-"
    return _num(p.predicted) + ("" if p.error is None else f" ({100 * p.error:+.1f}%)")


# ---------------------------------------------------------------------------------------- tune.json


def write_tune_json(path: Path, result: TuneResult) -> None:
    """Write tune.json atomically (a reader, or a --resume after a crash, never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(result), indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


def read_tune_json(path: Path) -> TuneResult:
    """A TuneResult from tune.json (as `write_tune_json` wrote it)."""
    raw = json.loads(Path(path).read_text())
    configs = []
    for c in raw.get("configs") or []:
        c = dict(c)
        c["points"] = [ProbePoint(**p) for p in c.get("points") or []]
        c["bracket"] = tuple(c["bracket"]) if c.get("bracket") is not None else None
        configs.append(ConfigResult(**c))
    steps = [GuidedStep(**s) for s in raw.get("steps") or []]
    predictions = [PredictedMeasured(**p) for p in raw.get("predictions") or []]
    earlier = [TuneSetting(**e) for e in raw.get("earlier") or []]
    return TuneResult(
        serve_cmd=list(raw["serve_cmd"]),
        search=raw.get("search"),
        slo=raw.get("slo"),
        gpus=int(raw.get("gpus", 1)),
        gpu_hourly_cost=raw.get("gpu_hourly_cost"),
        configs=configs,
        steps=steps,
        best=raw.get("best"),
        predictions=predictions,
        run_argv=raw.get("run_argv"),
        planned=raw.get("planned"),
        earlier=earlier,
    )
