"""A digital twin's parameters, fitted from what a measured run shows (pure maths, no simulator).

`swarm twin fit RUN_DIR` (swarm/tune/twin/command.py) reads a run's server scrapes and request records into
a `RunEvidence` (swarm/tune/twin/evidence.py); `fit_twin` turns it into the simulator profile's fields,
each a `Param` with its value, the evidence it rests on, a fit quality and a status:

- `fitted`: measured inside the range the run covered;
- `extrapolated`: measured, but the twin will use it beyond what the run reached (or in a unit only
  this workload defines: the KV pool when per-sequence state and tokens cannot be told apart);
- `refused`: the run cannot determine it (no KV gauge, a cap never reached); the value is None and
  a prediction that needs it must be given it (`--grid`, `--assume`).

The model is the simulator's engine (sim/engine.py): a step costs base + decode x running sequences
+ prefill x prompt tokens in the step; a decoding stream gets one token per step, so the mean
inter-token latency of a stage is that step's time at its mean running batch. KV usage is
(running x per-sequence state + tokens held) / pool. Field names are written here as data
(`step.base_s`, `engine.kv_cache_tokens`): this layer does not import the simulator.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

FITTED, EXTRAPOLATED, REFUSED = "fitted", "extrapolated", "refused"
MIN_STAGES = 2  # stages with a usable point a line needs
SEPARABLE_REL_SE = 0.2  # the tokens' KV coefficient must be this sure to split state from pool
SEPARABLE_SPREAD = 0.25  # ... and the tokens per running sequence must vary this much between stages
MAX_LENGTH_COMPONENTS = 64


@dataclass(frozen=True)
class StageEvidence:
    """One stage as the server and the client saw it (None: not exposed / not measured)."""

    stage: int
    users: int | None
    running_mean: float | None  # the server's running gauge (else the client's requests in flight)
    running_max: float | None
    running_pinned: float | None  # share of scrapes at the running maximum
    waiting_mean: float | None
    kv_mean: float | None  # the server's KV usage gauge, 0-1
    itl_mean_s: float | None  # the server's inter-token latency mean (else the client's mean TPOT)
    prefill_tok_s: float | None  # prompt tokens the server computed per second (cache hits excluded)
    kv_tokens_mean: float | None  # tokens (block-rounded) the client's decoding requests held, mean
    prefix_hit_rate: float | None
    itl_source: str = "server"  # server | client
    qps: float | None = None  # the client's completed requests per second
    batch_mean: float | None = None  # the client's decoding count as one token sees it (idle left out)
    # the client's e2e less the server's (its e2e histogram) over the requests ended in its window
    outside_s: float | None = None
    qps_ci: tuple[float, float] | None = None  # the run's own 95% interval of the stage's QPS
    completed: int = 0  # requests finished ok in the stage's measured window


@dataclass(frozen=True)
class RunEvidence:
    stages: tuple[StageEvidence, ...]
    ttft_low: tuple[tuple[int, float], ...]  # (prompt tokens, TTFT s) of the lowest-load stage's requests
    outputs: tuple[int, ...]  # output tokens of each finished request after warm-up
    cut_share: float  # share of them cut by max_tokens (finish_reason "length")
    longest_request: int  # most prompt + output tokens of one request
    block_size: int
    source: str  # vllm | llamacpp | unknown | none
    prompt_tokens: tuple[int, ...] = ()  # the server's count of each finished request's prompt
    # the lowest-load stage as the server timed it: (its prefill histogram's mean (scheduled to first
    # token), its ITL mean, the mean prompt tokens of the stage's requests); None: no prefill histogram
    prefill_low: tuple[float, float, float] | None = None
    workloads: tuple[str, ...] = ()  # the run's workloads (summary.json)


@dataclass(frozen=True)
class Param:
    name: str  # the profile field: "step.base_s", "engine.max_num_seqs", ...
    value: float | int | bool | None
    status: str  # FITTED | EXTRAPOLATED | REFUSED
    evidence: str
    quality: str


@dataclass
class TwinFit:
    params: dict[str, Param]
    output_lengths: list[tuple[float, int, int]]  # (weight, low, high) components
    running_reached: float | None  # the most running sequences the run saw (the step fit's range)
    notes: list[str] = field(default_factory=list)
    workloads: tuple[str, ...] = ()  # what the run sent (the prompt lengths' unit is theirs)


@dataclass(frozen=True)
class Line:
    """y = intercept + slope x by least squares, with standard errors and R^2."""

    intercept: float
    slope: float
    intercept_se: float
    slope_se: float
    r2: float
    n: int


def fit_line(x: Sequence[float], y: Sequence[float]) -> Line:
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    n = len(xs)
    a = np.column_stack([np.ones(n), xs])
    coef, *_ = np.linalg.lstsq(a, ys, rcond=None)
    resid = ys - a @ coef
    ss_tot = float(np.sum((ys - ys.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    se = [math.inf, math.inf]
    if n > 2:
        cov = float(np.sum(resid**2)) / (n - 2) * np.linalg.pinv(a.T @ a)
        se = [math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0))]
    return Line(float(coef[0]), float(coef[1]), se[0], se[1], r2, n)


def _quality(line: Line, what: str) -> str:
    return f"R^2 {line.r2:.3f} over {line.n} {what}; slope +/- {_pct(line.slope_se, line.slope)}"


def _pct(se: float, v: float) -> str:
    return "inf" if not math.isfinite(se) or v == 0 else f"{100 * se / abs(v):.0f}%"


# ---------------------------------------------------------------------------------------- step cost


def fit_step(ev: RunEvidence, prefill_token_s: float) -> tuple[list[Param], float | None]:
    """step.base_s and step.decode_token_s: the stages' mean ITL against the batch their tokens were
    made in (the client's decoding count weighted by itself, else the running gauge's mean), each ITL
    less the prefill its steps carried (prefill tokens per step x prefill_token_s)."""
    pts = [
        (batch, s.itl_mean_s * (1.0 - prefill_token_s * (s.prefill_tok_s or 0.0)), s.itl_source)
        for s in ev.stages
        if (batch := s.batch_mean or s.running_mean) and s.itl_mean_s is not None
    ]
    if len({round(p[0], 1) for p in pts}) < MIN_STAGES:
        why = "needs the ITL at two or more different running batches; the run has " + (
            f"{len(pts)} stage(s) with both" if pts else "no stage with an ITL and a running count"
        )
        return [Param(n, None, REFUSED, why, "-") for n in ("step.base_s", "step.decode_token_s")], None
    line = fit_line([p[0] for p in pts], [p[1] for p in pts])
    reach = max(p[0] for p in pts)
    where = f"{'server ITL histogram' if pts[0][2] == 'server' else 'client TPOT'} at batch " + ", ".join(
        f"{p[0]:.1f}" for p in sorted(pts)
    )
    q = _quality(line, "stages")
    base = Param("step.base_s", round(max(line.intercept, 0.0), 7), FITTED, f"ITL at 0 running: {where}", q)
    resolved = line.slope > 2 * line.slope_se
    decode = Param(
        "step.decode_token_s",
        round(max(line.slope, 0.0), 8),
        FITTED if resolved else EXTRAPOLATED,
        f"ITL per running sequence: {where} (fitted up to {reach:.1f} running)"
        + (
            ""
            if resolved
            else "; the ITL did not grow measurably with the batch, so every batch costs the same in the twin"
        ),
        q,
    )
    return [base, decode], reach


def fit_prefill(ev: RunEvidence) -> Param:
    """step.prefill_token_s: the server's own prefill time (its histogram, scheduled to first token) at
    the lowest load less one step (its ITL), over the mean prompt; without that histogram, TTFT against
    prompt length at the lowest load. (The slope is the weaker: over one workload's prompt lengths at a
    few dozen requests it came out three times too high against vLLM's CPU build, and its error passes
    into the step cost, which is fitted net of the prefill its steps carried.)"""
    server = _prefill_from_server(ev)
    if server is not None:
        return server
    if len(ev.ttft_low) < 10 or len({p for p, _ in ev.ttft_low}) < 3:
        why = (
            f"it needs the TTFTs of 10+ requests with 3+ prompt lengths at low load, the run has "
            f"{len(ev.ttft_low)} with {len({p for p, _ in ev.ttft_low})}"
        )
        return Param(
            "step.prefill_token_s",
            0.0,
            EXTRAPOLATED,
            f"not measured: {why}; 0 in the twin (its prompts' prefill is inside the step cost fitted from the "
            "ITL; longer prompts: extrapolated)",
            "-",
        )
    line = fit_line([p for p, _ in ev.ttft_low], [t for _, t in ev.ttft_low])
    lo, hi = min(p for p, _ in ev.ttft_low), max(p for p, _ in ev.ttft_low)
    where = f"TTFT against prompt length ({lo}-{hi} tokens) of {line.n} requests at the lowest load"
    if line.slope <= 0 or line.slope < 2 * line.slope_se:
        why = f"{where}: the slope ({line.slope:.2e} s/token) is within its noise"
        return Param(
            "step.prefill_token_s",
            0.0,
            EXTRAPOLATED,
            f"{why}, so the prompts' prefill cost is below what this run resolves; 0 in the twin (longer "
            "prompts: extrapolated)",
            _quality(line, "requests"),
        )
    return Param("step.prefill_token_s", round(line.slope, 9), FITTED, where, _quality(line, "requests"))


def _prefill_from_server(ev: RunEvidence) -> Param | None:
    """The server's prefill time at the lowest load less one decode step, per prompt token (a cost
    proportional to the prompt: exact at this workload's lengths, extrapolated for others)."""
    if ev.prefill_low is None:
        return None
    phase, itl, prompt = ev.prefill_low
    if prompt <= 0:
        return None
    value = max(phase - itl, 0.0) / prompt
    return Param(
        "step.prefill_token_s",
        round(value, 9),
        FITTED,
        f"the server's prefill histogram at the lowest load ({1000 * phase:.1f} ms scheduled to "
        f"first token) less one step (its ITL, {1000 * itl:.1f} ms) over the mean prompt ({prompt:.1f} tokens), "
        "taken as proportional to the prompt (other lengths: extrapolated)",
        "one stage's histogram means",
    )


# ---------------------------------------------------------------------------------------- limits


def fit_cap(ev: RunEvidence) -> Param:
    """engine.max_num_seqs: running pinned at one level while requests waited, the KV cache not full."""
    capped = [
        s
        for s in ev.stages
        if s.running_max is not None
        and s.users is not None
        and s.users >= s.running_max + max(1.0, 0.1 * s.users)
        and (s.running_pinned or 0.0) >= 0.5
        and (s.waiting_mean or 0.0) >= max(1.0, 0.1 * (s.users or 0))
        and (s.kv_mean is None or s.kv_mean < 0.9)
    ]
    seen = max((s.running_max or 0.0 for s in ev.stages), default=0.0)
    if not capped:
        return Param(
            "engine.max_num_seqs",
            None,
            REFUSED,
            f"never reached: at most {seen:g} running with no queue pinned behind them (give --grid max-num-seqs=N)",
            "-",
        )
    levels = sorted({round(s.running_max or 0.0) for s in capped})
    stages = ", ".join(f"{s.users} users: {s.waiting_mean:.1f} waiting" for s in capped)
    quality = "one level in every capped stage" if len(levels) == 1 else f"levels differ: {levels}"
    return Param(
        "engine.max_num_seqs", max(levels), FITTED, f"running pinned at {max(levels)} ({stages})", quality
    )


def fit_kv(ev: RunEvidence) -> list[Param]:
    """engine.kv_cache_tokens and engine.seq_state_tokens from the KV gauge against the running
    sequences and the tokens the client's running requests held: kv = (running x state + tokens) / pool."""
    names = ("engine.kv_cache_tokens", "engine.seq_state_tokens")
    if all(s.kv_mean is None for s in ev.stages):
        why = f"no KV-usage gauge in the server's metrics (source: {ev.source}): the KV capacity cannot be measured"
        return [Param(n, None, REFUSED, why, "-") for n in names]
    pts = [
        (s.running_mean, s.kv_tokens_mean, s.kv_mean)
        for s in ev.stages
        if s.kv_mean is not None and s.kv_mean > 0 and s.running_mean and s.kv_tokens_mean
    ]
    if len(pts) < MIN_STAGES:
        why = f"needs the KV gauge and the tokens in flight in two or more loaded stages; the run has {len(pts)}"
        return [Param(n, None, REFUSED, why, "-") for n in names]
    run, tok, kv = (np.asarray(c, float) for c in zip(*pts, strict=True))
    a = np.column_stack([run, tok])
    coef, *_ = np.linalg.lstsq(a, kv, rcond=None)
    resid = kv - a @ coef
    dof = max(len(kv) - 2, 1)
    cov = float(np.sum(resid**2)) / dof * np.linalg.pinv(a.T @ a)
    per_seq, per_token = float(coef[0]), float(coef[1])
    rel = math.sqrt(max(cov[1, 1], 0.0)) / per_token if per_token > 0 else math.inf
    where = "KV gauge against running and tokens held: " + ", ".join(
        f"{r:.0f} running/{t:.0f} tokens -> {100 * k:.1f}%" for r, t, k in pts
    )
    per_run = tok / run
    spread = float(np.std(per_run) / np.mean(per_run))
    if (
        per_token > 0
        and per_seq >= 0
        and rel < SEPARABLE_REL_SE
        and spread >= SEPARABLE_SPREAD
        and len(pts) > 2
    ):
        pool = round(1.0 / per_token)
        q = f"tokens coefficient +/- {100 * rel:.0f}%, worst residual {100 * float(np.max(np.abs(resid))):.2f} points"
        return [
            Param(names[0], pool, FITTED, where, q),
            Param(names[1], round(per_seq / per_token), FITTED, where, q),
        ]
    share = float(np.sum(kv * run) / np.sum(run * run))  # the pool share of one running sequence
    held = float(np.sum(tok) / np.sum(run))
    worst = float(np.max(np.abs(kv - share * run)))
    q = f"share per running sequence {100 * share:.3f}%, worst residual {100 * worst:.2f} points"
    why = (
        f"{where}; one running sequence takes {100 * share:.3f}% of the pool ({1 / share:.0f} sequences of "
        f"this workload fill it). Per-sequence state and tokens could not be told apart (the tokens per "
        f"running sequence, {held:.0f}, varied {100 * spread:.0f}% between stages), so the pool is stated in this workload's "
        "tokens: exact for it, extrapolated for other prompt and output lengths"
    )
    return [
        Param(names[0], round(held / share), EXTRAPOLATED, why, q),
        Param(names[1], 0, EXTRAPOLATED, why, q),
    ]


def fit_gap(ev: RunEvidence) -> Param:
    """client.gap_s: each request's time outside the engine (the client, HTTP, the API server): the
    client's end-to-end latency less the server's own (its e2e histogram) over the same requests (those
    ended in the server's window), the swarm sending each user's next request at once; without that
    histogram, by Little's law on the gauges: the users neither running nor waiting, over the QPS (a
    gauge read between steps can miss a sequence, so this one reads high)."""
    outside = [(s.users, max(s.outside_s, 0.0)) for s in ev.stages if s.users and s.outside_s is not None]
    if outside:
        return _gap("the client's e2e less the server's e2e histogram over the same requests", outside)
    pts = [
        (s.users, max(s.users - s.running_mean - (s.waiting_mean or 0.0), 0.0) / s.qps)
        for s in ev.stages
        if s.users and s.qps and s.running_mean is not None and s.waiting_mean is not None
    ]
    if not pts:
        return Param(
            "client.gap_s",
            None,
            REFUSED,
            "needs the server's e2e histogram, or its running and waiting gauges, and the stages' users: "
            "the twin's clients send back to back",
            "-",
        )
    return _gap("users neither running nor waiting over QPS (Little's law)", pts)


def _gap(how: str, pts: list[tuple[int, float]]) -> Param:
    """client.gap_s as the median of the stages' (users, gap) points, each named in the evidence."""
    gaps = [g for _, g in pts]
    return Param(
        "client.gap_s",
        round(float(np.median(gaps)), 5),
        FITTED,
        f"{how}, median of " + ", ".join(f"{u} users: {1000 * g:.1f} ms" for u, g in pts),
        f"{len(pts)} stages, {1000 * min(gaps):.1f}-{1000 * max(gaps):.1f} ms",
    )


def fit_prompts(ev: RunEvidence) -> Param:
    """lengths.prompt_tokens: the server's mean count of a prompt (its chat template and tokenizer),
    the unit the prefill cost was fitted in; the twin scales its drawn prompts to it."""
    if not ev.prompt_tokens:
        return Param(
            "lengths.prompt_tokens",
            None,
            REFUSED,
            "no request with the server's prompt-token count: the twin's prompts stay in words",
            "-",
        )
    n = len(ev.prompt_tokens)
    mean = sum(ev.prompt_tokens) / n
    return Param(
        "lengths.prompt_tokens",
        round(mean, 2),
        FITTED,
        f"the server's count of {n} prompts ({', '.join(ev.workloads) or 'the run'}), "
        f"{min(ev.prompt_tokens)}-{max(ev.prompt_tokens)} tokens",
        f"{n} requests",
    )


def fit_prefix(ev: RunEvidence) -> Param:
    rates = [s.prefix_hit_rate for s in ev.stages if s.prefix_hit_rate is not None]
    if not rates:
        return Param(
            "engine.prefix_caching",
            None,
            REFUSED,
            "no prefix-cache counters in the server's metrics: hit rate unknown (the twin runs without caching)",
            "-",
        )
    mean = sum(rates) / len(rates)
    return Param(
        "engine.prefix_caching",
        mean > 0,
        FITTED,
        f"prefix-cache hit rate {100 * mean:.1f}% (stages: {', '.join(f'{100 * r:.1f}%' for r in rates)})",
        f"{len(rates)} stages",
    )


# ---------------------------------------------------------------------------------------- lengths


def length_components(outputs: Sequence[int]) -> list[tuple[float, int, int]]:
    """The output lengths as a mixture: one (weight, value, value) per distinct length, or up to
    MAX_LENGTH_COMPONENTS uniform (weight, low, high) bins between quantiles when there are more."""
    values, counts = np.unique(np.asarray(outputs, int), return_counts=True)
    if len(values) <= MAX_LENGTH_COMPONENTS:
        return [(float(c), int(v), int(v)) for v, c in zip(values, counts, strict=True)]
    data = np.sort(np.asarray(outputs, int))
    edges = np.unique(np.quantile(data, np.linspace(0, 1, MAX_LENGTH_COMPONENTS + 1)).round().astype(int))
    out = []
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        top = hi if i == len(edges) - 2 else hi - 1
        n = int(np.sum((data >= lo) & (data <= top)))
        if n and top >= lo:
            out.append((float(n), int(lo), int(top)))
    return out


def fit_lengths(ev: RunEvidence) -> tuple[Param, list[tuple[float, int, int]]]:
    if not ev.outputs:
        return Param("lengths.output", None, REFUSED, "no finished requests with output tokens", "-"), []
    comps = length_components(ev.outputs)
    mean = sum(ev.outputs) / len(ev.outputs)
    cut = (
        f"; {100 * ev.cut_share:.0f}% cut by max_tokens (their natural length is unknown)"
        if ev.cut_share
        else ""
    )
    p = Param(
        "lengths.output",
        round(mean, 2),
        FITTED,
        f"{len(ev.outputs)} finished requests, mean {mean:.1f} tokens, {min(ev.outputs)}-{max(ev.outputs)}{cut}",
        f"empirical mixture of {len(comps)} components",
    )
    return p, comps


def fit_twin(ev: RunEvidence) -> TwinFit:
    """Every parameter the twin needs, from one run's evidence."""
    prefill = fit_prefill(ev)
    step, reach = fit_step(ev, float(prefill.value or 0.0))
    lengths, comps = fit_lengths(ev)
    params = [*step, prefill, fit_cap(ev), *fit_kv(ev), fit_prefix(ev), fit_gap(ev), lengths, fit_prompts(ev)]
    params.append(
        Param(
            "step.kv_read_token_s",
            0.0,
            EXTRAPOLATED,
            "a cost per context token cannot be told from the per-sequence cost at one workload's lengths; "
            "0 in the twin (it is inside step.decode_token_s)",
            "-",
        )
    )
    params.append(
        Param(
            "engine.max_model_len",
            ev.longest_request,
            EXTRAPOLATED,
            f"the longest request the run sent ({ev.longest_request} tokens); the server's own limit is not exposed",
            "-",
        )
    )
    params.append(
        Param(
            "engine.block_size",
            ev.block_size,
            EXTRAPOLATED,
            "vLLM's default block size (not exposed in the scrapes the run keeps)",
            "-",
        )
    )
    return TwinFit({p.name: p for p in params}, comps, reach, workloads=ev.workloads)
