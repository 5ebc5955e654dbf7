"""Simulator profiles: the engine limits, step cost and length distributions of one server.

A profile is a small TOML file (see `profiles/*.toml`), so adding a server needs no code. Bundled
profiles are found by name (`instant`, `rtx5090x4-qwen3.6-27b`); `--profile PATH.toml` loads a
user's own file. CLI flags override single fields (`with_overrides`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.sim.memory import Memory, parse_memory

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
REASONING_FIELDS = ("reasoning", "reasoning_content")
_DISTS = ("const", "uniform", "normal", "lognormal")


@dataclass(frozen=True)
class LengthComponent:
    """One part of a token-length mixture; `dist` picks which params matter."""

    weight: float = 1.0
    dist: str = "const"
    value: float = 0  # const
    low: float = 0  # uniform (inclusive)
    high: float = 0
    mean: float = 0  # normal
    sd: float = 0
    median: float = 0  # lognormal
    sigma: float = 0
    min: float = 1  # clamp after sampling
    max: float = math.inf

    def sample(self, rng: random.Random) -> int:
        if self.dist == "const":
            x = self.value
        elif self.dist == "uniform":
            x = rng.randint(int(self.low), int(self.high))
        elif self.dist == "normal":
            x = rng.gauss(self.mean, self.sd)
        else:  # lognormal
            x = self.median * math.exp(rng.gauss(0.0, self.sigma))
        return int(max(self.min, min(self.max, round(x))))


@dataclass(frozen=True)
class LengthDist:
    """A mixture of length components: natural answer or reasoning lengths in tokens."""

    components: tuple[LengthComponent, ...]

    def sample(self, rng: random.Random) -> int:
        if len(self.components) == 1:
            return self.components[0].sample(rng)
        r = rng.random() * sum(c.weight for c in self.components)
        for c in self.components:
            r -= c.weight
            if r < 0:
                return c.sample(rng)
        return self.components[-1].sample(rng)

    def mean_capped(self, cap: int, n: int = 20000, seed: int = 1) -> float:
        """Monte-Carlo mean of min(length, cap): what a max_tokens cap leaves on average."""
        rng = random.Random(seed)
        return sum(min(cap, self.sample(rng)) for _ in range(n)) / n


@dataclass(frozen=True)
class StepCost:
    """Wall time of one engine step: a fixed weight-read cost plus per-token costs.

    step_s = base_s + decode_token_s * decode_tokens + prefill_token_s * prefill_tokens
             + kv_read_token_s * context tokens of the scheduled sequences
    """

    base_s: float = 0.0
    decode_token_s: float = 0.0
    prefill_token_s: float = 0.0
    kv_read_token_s: float = 0.0

    @property
    def instant(self) -> bool:
        return not (self.base_s or self.decode_token_s or self.prefill_token_s or self.kv_read_token_s)

    def token_costs_scaled(self, factor: float) -> StepCost:
        """The per-token costs times `factor`, the fixed `base_s` unchanged (`swarm sim
        --token-cost-scale`): a GPU `factor` times slower at the work that grows with the batch, so a
        step's time grows in proportion to its batch and throughput stops growing with it
        (compute-bound) long before KV or the sequence cap are reached."""
        return dataclasses.replace(
            self,
            decode_token_s=self.decode_token_s * factor,
            prefill_token_s=self.prefill_token_s * factor,
            kv_read_token_s=self.kv_read_token_s * factor,
        )


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    # engine limits
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_cache_tokens: int = 262144
    max_model_len: int = 32768
    block_size: int = 16
    prefix_caching: bool = True
    seq_state_tokens: int = 0  # fixed KV per running sequence (hybrid-attention state)
    chunked_prefill: bool = True  # False: a prompt's prefill waits for a step whose budget holds it whole
    ubatch_tokens: int = 0  # llama.cpp -ub: a step pays base_s once per ubatch of this many tokens (0: once)
    memory: Memory | None = None  # [memory]: what kv_cache_tokens is derived from (sim/memory.py)
    # step cost
    step: StepCost = field(default_factory=StepCost)
    # lengths
    output_tokens: LengthDist = field(default_factory=lambda: LengthDist((LengthComponent(value=64),)))
    reasoning_tokens: LengthDist = field(default_factory=lambda: LengthDist((LengthComponent(value=2000),)))
    # tool calls (swarm/sim/tool_calls.py): the share of `auto` answers that call a tool, the
    # argument tokens of a call, the calls in an answer
    tool_call_rate: float = 0.8
    tool_arguments: LengthDist = field(default_factory=lambda: LengthDist((LengthComponent(value=24),)))
    tool_calls: LengthDist = field(default_factory=lambda: LengthDist((LengthComponent(value=1),)))
    # dialect and text
    thinking_default: bool = False
    reasoning_field: str = "reasoning"
    merge_reasoning: bool = False
    utf8_split: float = 0.0

    @property
    def reports_reasoning_tokens(self) -> bool:
        """Chat usage says how many tokens were reasoning (`completion_tokens_details`), as vLLM
        does with a reasoning parser (`reasoning` field); not in the older `reasoning_content`
        dialect, nor when reasoning is merged into content (no parser)."""
        return self.reasoning_field == "reasoning" and not self.merge_reasoning

    def draw_output(
        self,
        rng: random.Random,
        max_tokens: int,
        thinking: bool,
        ignore_eos: bool = False,
        min_tokens: int = 0,
    ) -> tuple[int, int, str]:
        """(completion tokens, of which reasoning, finish reason) for one request.

        Thinking adds a reasoning length before the answer; without ignore_eos the answer has a
        natural length (EOS included) and `max_tokens` cuts whatever is longer ("length").
        """
        reasoning = self.reasoning_tokens.sample(rng) if thinking else 0
        if ignore_eos:
            return max_tokens, min(reasoning, max_tokens), "length"
        natural = max(reasoning + self.output_tokens.sample(rng), min_tokens)
        if natural > max_tokens:
            return max_tokens, min(reasoning, max_tokens), "length"
        return natural, reasoning, "stop"

    def with_overrides(self, **changes: Any) -> Profile:
        """A copy with the given fields replaced (None values are ignored), then validated."""
        p = dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})
        p.validate()
        return p

    def validate(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise UsageError(f"profile {self.name!r}: {what}")

        need(self.max_num_seqs >= 1, "max_num_seqs must be >= 1")
        need(self.block_size >= 1, "block_size must be >= 1")
        need(self.max_model_len >= 2, "max_model_len must be >= 2")
        need(self.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1")
        need(0.0 <= self.utf8_split < 1.0, "utf8_split must be in [0, 1)")
        need(0.0 <= self.tool_call_rate <= 1.0, "[tools] call_rate must be in [0, 1]")
        need(self.reasoning_field in REASONING_FIELDS, f"reasoning_field must be one of {REASONING_FIELDS}")
        need(self.seq_state_tokens >= 0, "seq_state_tokens must be >= 0")
        need(self.ubatch_tokens >= 0, "ubatch_tokens must be >= 0")
        need(
            self.chunked_prefill or self.max_num_batched_tokens >= self.max_model_len,
            f"without chunked prefill max_num_batched_tokens ({self.max_num_batched_tokens}) must be at "
            f"least max_model_len ({self.max_model_len}), as vLLM requires",
        )
        one_seq = self.max_model_len + self.seq_state_tokens + self.block_size
        need(
            self.kv_cache_tokens >= one_seq,
            f"kv_cache_tokens ({self.kv_cache_tokens}) must hold one full-length sequence "
            f"(max_model_len + seq_state_tokens + one block = {one_seq}); raise --kv-cache-tokens "
            "or lower --max-model-len",
        )


def _dist(raw: Any, where: str) -> LengthDist:
    items = raw if isinstance(raw, list) else [raw]
    comps = []
    for item in items:
        if not isinstance(item, dict):
            raise UsageError(
                f"{where}: each component must be a table like {{dist = 'uniform', low = 1, high = 9}}"
            )
        unknown = set(item) - {f.name for f in dataclasses.fields(LengthComponent)}
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {sorted(unknown)}")
        c = LengthComponent(**item)
        if c.dist not in _DISTS:
            raise UsageError(f"{where}: dist must be one of {_DISTS}, got {c.dist!r}")
        if c.weight <= 0:
            raise UsageError(f"{where}: weight must be > 0")
        comps.append(c)
    if not comps:
        raise UsageError(f"{where}: needs at least one component")
    return LengthDist(tuple(comps))


def parse_profile(data: dict[str, Any], name: str) -> Profile:
    """Build a `Profile` from the TOML tables `[engine]`, `[step]`, `[lengths]`, `[dialect]`, `[tools]`."""
    known = {"name", "description", "engine", "step", "lengths", "dialect", "memory", "tools"}
    if unknown := set(data) - known:
        raise UsageError(f"profile {name!r}: unknown table(s) {sorted(unknown)}; expected {sorted(known)}")
    kw: dict[str, Any] = {
        "name": str(data.get("name", name)),
        "description": str(data.get("description", "")),
    }
    engine_keys = {
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_tokens",
        "max_model_len",
        "block_size",
        "prefix_caching",
        "seq_state_tokens",
        "chunked_prefill",
        "ubatch_tokens",
    }
    dialect_keys = {"thinking_default", "reasoning_field", "merge_reasoning", "utf8_split"}
    for table, keys in (("engine", engine_keys), ("dialect", dialect_keys)):
        section = data.get(table, {})
        if unknown := set(section) - keys:
            raise UsageError(f"profile {name!r}: unknown key(s) in [{table}]: {sorted(unknown)}")
        kw.update(section)
    if "memory" in data:
        if "kv_cache_tokens" in kw:
            raise UsageError(f"profile {name!r}: give [engine] kv_cache_tokens or a [memory] table, not both")
        kw["memory"] = mem = parse_memory(data["memory"], f"profile {name!r}")
        kw["kv_cache_tokens"] = mem.kv_tokens(mem.gpu_memory_utilization)
    step = data.get("step", {})
    if unknown := set(step) - {f.name for f in dataclasses.fields(StepCost)}:
        raise UsageError(f"profile {name!r}: unknown key(s) in [step]: {sorted(unknown)}")
    kw["step"] = StepCost(**{k: float(v) for k, v in step.items()})
    lengths = data.get("lengths", {})
    if unknown := set(lengths) - {"output", "reasoning"}:
        raise UsageError(f"profile {name!r}: unknown key(s) in [lengths]: {sorted(unknown)}")
    if "output" in lengths:
        kw["output_tokens"] = _dist(lengths["output"], f"profile {name!r} [lengths] output")
    if "reasoning" in lengths:
        kw["reasoning_tokens"] = _dist(lengths["reasoning"], f"profile {name!r} [lengths] reasoning")
    tools = data.get("tools", {})
    if unknown := set(tools) - {"call_rate", "arguments", "calls"}:
        raise UsageError(f"profile {name!r}: unknown key(s) in [tools]: {sorted(unknown)}")
    if "call_rate" in tools:
        kw["tool_call_rate"] = float(tools["call_rate"])
    if "arguments" in tools:
        kw["tool_arguments"] = _dist(tools["arguments"], f"profile {name!r} [tools] arguments")
    if "calls" in tools:
        kw["tool_calls"] = _dist(tools["calls"], f"profile {name!r} [tools] calls")
    try:
        profile = Profile(**kw)
    except TypeError as e:
        raise UsageError(f"profile {name!r}: {e}") from None
    profile.validate()
    return profile


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load_profile(name_or_path: str) -> Profile:
    """A bundled profile by name, or a user's TOML file by path."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.exists():
        if not path.is_file():
            raise UsageError(f"profile file {name_or_path!r} not found")
        name = path.stem
    else:
        path = PROFILE_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise UsageError(
                f"unknown profile {name_or_path!r}; bundled: {', '.join(bundled_profiles())} "
                "(or pass a path to your own .toml)"
            )
        name = name_or_path
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"profile {str(path)!r}: cannot read: {e}") from None
    return parse_profile(data, name)
