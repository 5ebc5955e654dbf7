"""A twin's predictions: each configuration searched on the simulator's engine on a virtual clock.

For one configuration (a `swarm tune` grid's flags) the twin's profile takes the flags as
`swarm sim` maps a real server's (`flag_overrides`), then the stated assumptions (`--assume
"decode_cost*0.6"`: effects no flag maps, such as quantisation or speculative decoding), and the
concurrency search runs closed loops on sim/calibrate.py's virtual clock: the most users whose steady
TTFT p99 meets the SLO, in seconds of CPU instead of a server restart and minutes of load. The result
is a tune `ConfigResult` (its table, Pareto chart and bottleneck column are tune's own), with the
notes a prediction carries: the assumptions (an fp8 cache's included), and where it is extrapolated
(more running sequences than the fitted run reached).
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from swarm.core.errors import UsageError
from swarm.load.workloads import workload_draw
from swarm.sim.calibrate import CLIENT_GAP_S, Draw, LevelResult, closed_loop
from swarm.sim.memory import VLLM_KV_DTYPES
from swarm.sim.profile import Profile, StepCost
from swarm.tune.results import ConfigResult, ProbePoint
from swarm.tune.twin.fit import REFUSED
from swarm.tune.twin.profile import Twin

WARMUP_S = 10.0  # virtual seconds before each level's window
WINDOW_S = 60.0
MAX_USERS = 4096
# --assume NAME: the profile field it changes
ASSUMABLE = {
    "base_cost": "step.base_s",
    "decode_cost": "step.decode_token_s",
    "prefill_cost": "step.prefill_token_s",
    "kv_cache_tokens": "engine.kv_cache_tokens",
    "seq_state_tokens": "engine.seq_state_tokens",
    "max_num_seqs": "engine.max_num_seqs",
}
# --assume NAME: the least whole number its field may hold (every other name is a cost in seconds)
WHOLE = {"kv_cache_tokens": 1, "seq_state_tokens": 0, "max_num_seqs": 1}
_ASSUME = re.compile(r"^\s*(?P<name>[a-z_]+)\s*(?P<op>[*=])\s*(?P<num>[0-9.eE+-]+)\s*$")
# a real server's flag -> the profile field it sets (the same mapping as sim/engine_flags.py)
INT_FLAGS = {
    "--max-num-seqs": "max_num_seqs",
    "-np": "max_num_seqs",
    "--parallel": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "-b": "max_num_batched_tokens",
    "--batch-size": "max_num_batched_tokens",
    "--max-model-len": "max_model_len",
    "-ub": "ubatch_tokens",
    "--ubatch-size": "ubatch_tokens",
}
BOOL_FLAGS = {
    "--enable-chunked-prefill": ("chunked_prefill", True),
    "--no-enable-chunked-prefill": ("chunked_prefill", False),
    "--enable-prefix-caching": ("prefix_caching", True),
    "--no-enable-prefix-caching": ("prefix_caching", False),
}


@dataclass(frozen=True)
class Assumption:
    name: str
    op: str  # "*" or "="
    value: float
    text: str


def parse_assumptions(specs: list[str]) -> list[Assumption]:
    out = []
    for spec in specs:
        m = _ASSUME.match(spec)
        if not m or m["name"] not in ASSUMABLE:
            raise UsageError(
                f"bad --assume {spec!r}: expected NAME*FACTOR or NAME=VALUE with NAME one of "
                f"{', '.join(ASSUMABLE)}, e.g. decode_cost*0.6"
            )
        try:
            value = float(m["num"])
        except ValueError:
            raise UsageError(f"bad --assume {spec!r}: {m['num']!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"bad --assume {spec!r}: the number must be finite and >= 0")
        least = WHOLE.get(m["name"])
        if m["op"] == "=" and least is not None and (value != int(value) or value < least):
            raise UsageError(f"bad --assume {spec!r}: {m['name']} is a whole number >= {least}")
        out.append(Assumption(m["name"], m["op"], value, spec.strip()))
    return out


def flag_overrides(flags: dict[str, str], profile: Profile) -> dict[str, object]:
    """The profile fields a configuration's flags set. UsageError on a flag the twin cannot map."""
    out: dict[str, object] = {}
    for flag, value in flags.items():
        if flag in INT_FLAGS:
            try:
                out[INT_FLAGS[flag]] = int(value)
            except ValueError:
                raise UsageError(f"{flag} {value}: not an integer") from None
            if out[INT_FLAGS[flag]] < 1:
                raise UsageError(f"{flag} {value}: must be >= 1")
        elif flag in BOOL_FLAGS:
            out[BOOL_FLAGS[flag][0]] = BOOL_FLAGS[flag][1]
        elif flag == "--kv-cache-dtype":
            if value not in VLLM_KV_DTYPES:
                raise UsageError(f"--kv-cache-dtype {value}: one of {', '.join(VLLM_KV_DTYPES)}")
            out["kv_cache_tokens"] = int(profile.kv_cache_tokens / VLLM_KV_DTYPES[value])
        else:
            raise UsageError(
                f"{flag}: the twin maps no such flag (it needs what the run cannot show, e.g. the weights' "
                'memory for --gpu-memory-utilization); state its effect with --assume, e.g. "kv_cache_tokens*1.1"'
            )
    return out


def _assumed(profile: Profile, assumptions: list[Assumption]) -> Profile:
    """The profile with the assumptions applied. UsageError for one that leaves a whole number below
    its least (max_num_seqs*0.1 of 8) or a cost no request could finish under: one token's, or a
    step's fixed cost, longer than the window a level is measured over (or not finite)."""
    step = profile.step
    changes: dict[str, object] = {}
    for a in assumptions:
        table, _, key = ASSUMABLE[a.name].partition(".")
        current = getattr(step if table == "step" else profile, key)
        new = current * a.value if a.op == "*" else a.value
        if table == "step":
            if not (math.isfinite(new) and new <= WINDOW_S):
                raise UsageError(
                    f"--assume {a.text!r}: {a.name} becomes {new:g} s, more than the {WINDOW_S:g} s "
                    "window the twin measures each level over: no request would finish"
                )
            step = StepCost(**{**step.__dict__, key: float(new)})
        else:
            if round(new) < WHOLE[a.name]:
                raise UsageError(f"--assume {a.text!r}: {a.name} becomes {round(new)}, below {WHOLE[a.name]}")
            changes[key] = round(new)
    return profile.with_overrides(step=step, **changes)


@dataclass
class Prediction:
    config: ConfigResult
    notes: list[str] = field(default_factory=list)  # assumptions and extrapolations


def configure_profile(twin: Twin, flags: dict[str, str], assumptions: list[Assumption]) -> Profile:
    """The twin's profile at these flags and assumptions. UsageError naming a refused parameter
    the prediction needs and nothing gives."""
    overrides = flag_overrides(flags, twin.profile)
    named = {ASSUMABLE[a.name] for a in assumptions if a.op == "="}
    for name, p in twin.params.items():
        field_name = name.partition(".")[2]
        given = field_name in overrides or name in named
        if p.status == REFUSED and name in {"engine.max_num_seqs", "engine.kv_cache_tokens"} and not given:
            how = "--grid max-num-seqs=N" if field_name == "max_num_seqs" else f'--assume "{field_name}=N"'
            raise UsageError(f"the twin refused {field_name} ({p.evidence}); give it with {how}")
        if (
            p.status == REFUSED
            and name.startswith("step.")
            and not any(ASSUMABLE[a.name] == name for a in assumptions if a.op == "=")
        ):
            raise UsageError(f"the twin refused {name} ({p.evidence}); it cannot predict without it")
    return _assumed(twin.profile.with_overrides(**overrides), assumptions)


def search_users(
    level: Callable[[int], LevelResult], limit_s: float
) -> tuple[int | None, int | None, dict[int, LevelResult]]:
    """(most users meeting TTFT p99 <= limit_s, fewest failing it, every level run): doubling from 1,
    then bisection down to one user."""
    seen: dict[int, LevelResult] = {}

    def ok(users: int) -> bool:
        seen[users] = r = level(users)
        return r.ttft_p99 is not None and r.ttft_p99 <= limit_s

    if not ok(1):
        return None, 1, seen
    lo, hi = 1, 2
    while hi <= MAX_USERS and ok(hi):
        lo, hi = hi, hi * 2
    if hi > MAX_USERS:
        return lo, None, seen
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, hi, seen


def bottleneck(r: LevelResult, profile: Profile) -> tuple[str, str]:
    """What held the load at the first failing level, read from the twin's engine."""
    if r.max_kv >= 0.95 or r.preemptions:
        return "kv_bound", (
            f"At {r.concurrency} users the twin's KV cache filled ({100 * r.max_kv:.0f}% at most, "
            f"{r.preemptions} preemptions) with {r.mean_running:.0f} running"
        )
    if r.mean_running >= 0.95 * profile.max_num_seqs:
        return "max_num_seqs_cap", (
            f"At {r.concurrency} users running sat at the cap ({r.mean_running:.0f} of "
            f"{profile.max_num_seqs}) with the KV cache {100 * r.mean_kv:.0f}% full"
        )
    return "compute_bound", (
        f"At {r.concurrency} users {r.mean_running:.0f} ran, under the cap ({profile.max_num_seqs}) with the "
        f"KV cache {100 * r.mean_kv:.0f}% full: each step's cost grew with the batch"
    )


def _point(r: LevelResult, limit_s: float) -> ProbePoint:
    per_user = 1.0 / r.tpot_mean if r.tpot_mean else r.output_tok_s / max(r.concurrency, 1)
    return ProbePoint(
        users=r.concurrency,
        rate=None,
        qps=r.qps,
        output_tok_s=r.output_tok_s,
        output_tok_s_per_user=per_user,
        ttft_p99_s=r.ttft_p99,
        tpot_p99_s=None,
        met_slo=r.ttft_p99 is not None and r.ttft_p99 <= limit_s,
    )


def predict(
    twin: Twin, name: str, flags: dict[str, str], assumptions: list[Assumption], draw: Draw, limit_s: float
) -> Prediction:
    """One configuration predicted: its answer for TTFT p99 <= limit_s on the virtual clock."""
    profile = configure_profile(twin, flags, assumptions)

    def level(users: int) -> LevelResult:
        return level_result(twin, profile, users, draw, limit_s)

    answer, failing, seen = search_users(level, limit_s)
    invalid = invalid_reason(seen)
    if invalid is not None:  # never a row that could be starred best
        config = ConfigResult(name=name, flags=dict(flags), command=[], status="invalid", reason=invalid)
        return Prediction(config, [f"assumes {a.text}" for a in assumptions])
    at = seen[answer] if answer is not None else seen[1]
    kind, why = bottleneck(seen[failing], profile) if failing is not None else ("no_saturation", "")
    config = ConfigResult(
        name=name,
        flags=dict(flags),
        command=[],
        status="ok",
        answer=None if answer is None else float(answer),
        bracket=None if answer is None or failing is None else (float(answer), float(failing)),
        qps=at.qps,
        output_tok_s=at.output_tok_s,
        ttft_p99_s=at.ttft_p99,
        bottleneck=kind,
        why=why or None,
        points=[_point(seen[u], limit_s) for u in sorted(seen)],
    )
    notes = [f"assumes {a.text}" for a in assumptions]
    scale = prompt_scale(twin.prompt_tokens, twin.workloads)
    if scale is not None:
        notes.append(
            f"prompts scaled to the server's count: {scale:.2f} tokens per drawn word (fitted on "
            f"{', '.join(twin.workloads)}; its chat template and tokenizer)"
        )
    if flags.get("--kv-cache-dtype", "auto") != "auto":
        notes.append(
            f"--kv-cache-dtype {flags['--kv-cache-dtype']} taken to halve every KV byte (an upper bound where "
            "a hybrid model keeps its linear-attention state in its own dtype)"
        )
    reached = twin.running_reached
    if reached is not None and max(r.mean_running for r in seen.values()) > 1.05 * reached:
        top = max(r.mean_running for r in seen.values())
        notes.append(f"extrapolated: up to {top:.0f} running; the fitted run reached {reached:.0f}")
    return Prediction(config, notes)


def invalid_reason(seen: dict[int, LevelResult]) -> str | None:
    """Why the levels run answer nothing (None when they do): a figure that is not finite, or not one
    request finished at 1 user within the window (the costs assumed are beyond what the twin answers)."""
    for users, r in sorted(seen.items()):
        figures = (r.qps, r.output_tok_s, r.mean_running, r.ttft_p99 or 0.0, r.tpot_mean or 0.0)
        if not all(math.isfinite(x) for x in figures):
            return f"a figure of the twin's engine at {users} users is not finite"
    first = seen.get(1)
    if first is not None and first.ttft_p99 is None and not first.qps:
        return f"no request finished within the twin's {WINDOW_S:g} s window at 1 user"
    return None


def level_result(
    twin: Twin, profile: Profile, users: int, draw: Draw, limit_s: float | None = None
) -> LevelResult:
    """`users` in a closed loop on the twin at `profile`, each request spending the fitted time
    outside the engine between its predecessor's end and its arrival, its prompt as long as the
    server counts it (`prompt_scale`)."""
    gap = CLIENT_GAP_S if twin.gap_s is None else twin.gap_s
    scale = prompt_scale(twin.prompt_tokens, twin.workloads)
    return closed_loop(
        profile,
        (),
        0,
        users,
        WARMUP_S,
        WINDOW_S,
        seed=users,
        ttft_limit_s=limit_s,
        draw=draw if scale is None else scaled_draw(draw, scale),
        gap_s=gap,
    )


SCALE_SAMPLES = 400  # prompts drawn to measure a workload's mean length in words
SCALE_TOLERANCE = 0.02  # a scale this close to 1 leaves the prompts as drawn


@functools.cache
def prompt_scale(prompt_tokens: float | None, workloads: tuple[str, ...]) -> float | None:
    """The server's tokens per drawn word: its mean prompt count in the fitted run (its chat template
    and tokenizer) over the mean length the twin draws for the same workloads; None where either is
    unknown (prompts stay as drawn) or the two agree within 2%. The prefill cost was fitted per server
    token, so the twin's prompts must be in that unit."""
    if not prompt_tokens or not workloads:
        return None
    try:
        draw = workload_draw(",".join(workloads))
    except UsageError:
        return None
    rng = random.Random(0)
    words = sum(len(draw(rng)[0]) for _ in range(SCALE_SAMPLES)) / SCALE_SAMPLES
    scale = prompt_tokens / words if words else 1.0
    return None if abs(scale - 1.0) <= SCALE_TOLERANCE else scale


def scaled_draw(draw: Draw, scale: float) -> Draw:
    """`draw` with each prompt stretched to `scale` times its length; word i of the result comes from
    word i / scale of the drawn prompt, so prompts sharing a prefix share its stretched prefix too."""

    def stretched(rng: random.Random) -> tuple[list[str], int]:
        words, max_tokens = draw(rng)
        n = max(1, round(len(words) * scale))
        return [f"{words[min(int(i / scale), len(words) - 1)]}~{i}" for i in range(n)], max_tokens

    return stretched
