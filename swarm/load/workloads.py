"""Workloads: what each request asks for (prompt, max_tokens, thinking on/off).

A workload draws one `LLMRequest` at a time from a shipped prompt set (swarm/load/prompts/), with the
defaults of the seed documents (REFERENCE.md §1):

| name        | prompts                                          | max_tokens | thinking          |
|-------------|--------------------------------------------------|------------|-------------------|
| mixed       | general chat (direct) + reasoning tasks          | 1024       | 20% on (settable) |
| short_qa    | seed 000's 15 short-output prompts               | 50         | off               |
| chat        | general chat, Chinese and English                | 150-256    | off               |
| rag         | fixed preamble + template + retrieved passages   | 256        | off               |
| long_output | summarise a shipped document (~500 tokens)       | 512        | off               |
| translate   | one sentence zh->en / en->zh (~50 tokens)        | 64         | off               |
| custom      | the user's JSONL/CSV file (--prompt-file)        | 256 / row  | off / row         |

The built-in workloads are defined in swarm/load/builtin.py, the custom file's rows are read by
swarm/load/prompt_file.py; every kind satisfies `Workload` (swarm/load/request.py).
Several workloads mix with weights (`short_qa:3,chat:1`); the user draws one per request.
Prompt sizes are *targeted* with the pseudo-tokenizer of swarm.core.tokens (exact on the simulator,
an estimate elsewhere); the token counts the swarm reports always come from the server's usage.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.tokens import chat_prompt_tokens
from swarm.load.agent import AgentWorkload, load_tools
from swarm.load.builtin import PromptSetWorkload, RagWorkload, prompt_set, summary_prompts
from swarm.load.dataset import DatasetWorkload
from swarm.load.dists import MAX_TOKENS, parse_dist
from swarm.load.prompt_file import load_prompt_file
from swarm.load.request import LLMRequest, Prompt, Workload
from swarm.load.sessions import ChatSessionWorkload
from swarm.load.synthetic import SyntheticWorkload


@dataclass(frozen=True)
class Knobs:
    """Workload knobs (Locust options); None = the workload's own default."""

    thinking_ratio: float | None = None  # share of requests with thinking on (mixed: 0.2, others: 0)
    max_tokens: int | None = None  # overrides every workload's max_tokens
    rag_passages: int = 4
    rag_prefix_share: float = 0.5  # share of each rag prompt that is a prefix common to all of them
    rag_tokens: tuple[int, int] = (2000, 3000)  # rag prompt size range (prompt tokens, estimated)
    prompt_file: str | None = None  # custom workload
    input_tokens: str = "1024"  # synthetic: DIST of prompt tokens (swarm/load/dists.py)
    output_tokens: str = "128"  # synthetic: DIST of output tokens
    seed: int | None = None  # synthetic: lengths and texts; None: drawn once per run by the master
    no_ignore_eos: bool = False  # synthetic: do not force output lengths
    shared_prefix_tokens: int = 0  # synthetic: tokens of the prefix shared within a group
    prefix_groups: int = 1  # synthetic: distinct shared prefixes
    dataset: str | None = None  # dataset: KIND:PATH (swarm/load/dataset.py)
    dataset_columns: str | None = None  # dataset: prompt=COL,output_tokens=COL,class=COL
    dataset_sample: int | None = None  # dataset: rows kept
    turns: str | None = None  # chat_session: DIST of turns per conversation (None: 4; a dataset's own)
    think_time: str = "0"  # chat_session: DIST of seconds between turns (swarm/load/dists.py, real)
    agent_steps: str = "4"  # agent: DIST of the most steps a task takes
    tools: str = "builtin"  # agent: builtin or a JSON file of OpenAI tools
    tool_choice: str = "required"  # agent: auto | required | a function's name
    tool_result_tokens: str = "64"  # agent: DIST of a tool result's tokens
    tool_latency: str = "0"  # agent: DIST of a step's tools' time (durations)

    def __post_init__(self) -> None:
        if self.thinking_ratio is not None and not 0.0 <= self.thinking_ratio <= 1.0:
            raise UsageError(f"--thinking-ratio must be between 0 and 1 (got {self.thinking_ratio})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be at least 1 (got {self.max_tokens})")
        if self.max_tokens is not None and self.max_tokens > MAX_TOKENS:
            raise UsageError(f"--max-tokens must be at most {MAX_TOKENS:,} (got {self.max_tokens:,})")
        if not 1 <= self.rag_passages <= 32:
            raise UsageError(f"--rag-passages must be 1-32 (got {self.rag_passages})")
        if not 0.0 <= self.rag_prefix_share <= 0.9:
            raise UsageError(f"--rag-prefix-share must be between 0 and 0.9 (got {self.rag_prefix_share})")
        if self.shared_prefix_tokens < 0:
            raise UsageError(f"--shared-prefix-tokens must be >= 0 (got {self.shared_prefix_tokens})")
        if self.shared_prefix_tokens > MAX_TOKENS:  # as --input-tokens: no server takes a longer prompt
            raise UsageError(
                f"--shared-prefix-tokens must be at most {MAX_TOKENS:,} (got {self.shared_prefix_tokens:,})"
            )
        if not 1 <= self.prefix_groups <= 100_000:
            raise UsageError(f"--prefix-groups must be 1-100000 (got {self.prefix_groups})")
        lo, hi = self.rag_tokens
        if not 200 <= lo <= hi <= 32000:
            raise UsageError(f"--rag-tokens must be N or MIN-MAX within 200-32000 (got {lo}-{hi})")


def parse_token_range(text: str) -> tuple[int, int]:
    """`2500` or `2000-3000` -> (lo, hi). Raises UsageError."""
    try:
        parts = [int(p) for p in str(text).replace(" ", "").split("-")]
    except ValueError:
        parts = []
    if len(parts) == 1:
        return parts[0], parts[0]
    if len(parts) == 2 and parts[0] <= parts[1]:
        return parts[0], parts[1]
    raise UsageError(f"bad --rag-tokens {text!r}: give N or MIN-MAX, e.g. 2000-3000")


# -- registry ---------------------------------------------------------------------------------


def _fixed(n: int, knobs: Knobs) -> tuple[int, int]:
    return (knobs.max_tokens, knobs.max_tokens) if knobs.max_tokens else (n, n)


def _mixed(k: Knobs) -> Workload:
    ratio = 0.2 if k.thinking_ratio is None else k.thinking_ratio
    return PromptSetWorkload(
        name="mixed",
        prompts=prompt_set("chat"),
        max_tokens=_fixed(1024, k),
        thinking_ratio=ratio,
        thinking_prompts=prompt_set("thinking"),
    )


def _prompt_set_workload(
    name: str, prompts: tuple[Prompt, ...], max_tokens: tuple[int, int], k: Knobs
) -> Workload:
    return PromptSetWorkload(
        name=name, prompts=prompts, max_tokens=max_tokens, thinking_ratio=k.thinking_ratio or 0.0
    )


def _short_qa(k: Knobs) -> Workload:
    return _prompt_set_workload("short_qa", prompt_set("short_qa"), _fixed(50, k), k)


def _chat(k: Knobs) -> Workload:
    mt = (k.max_tokens, k.max_tokens) if k.max_tokens else (150, 256)
    return _prompt_set_workload("chat", prompt_set("chat"), mt, k)


def _long_output(k: Knobs) -> Workload:
    return _prompt_set_workload("long_output", summary_prompts(), _fixed(512, k), k)


def _translate(k: Knobs) -> Workload:
    return _prompt_set_workload("translate", prompt_set("translate"), _fixed(64, k), k)


def _custom(k: Knobs) -> Workload:
    if not k.prompt_file:
        raise UsageError("workload 'custom' needs --prompt-file FILE (JSONL or CSV)")
    return _prompt_set_workload("custom", load_prompt_file(k.prompt_file), _fixed(256, k), k)


def _rag(k: Knobs) -> Workload:
    return RagWorkload(
        passages=k.rag_passages,
        prefix_share=k.rag_prefix_share,
        size=k.rag_tokens,
        max_tokens=k.max_tokens or 256,
        thinking_ratio=k.thinking_ratio or 0.0,
    )


def _synthetic(k: Knobs) -> SyntheticWorkload:
    return SyntheticWorkload(
        parse_dist(k.input_tokens, "--input-tokens", most=MAX_TOKENS),
        parse_dist(k.output_tokens, "--output-tokens", most=MAX_TOKENS),
        seed=k.seed,
        ignore_eos=not k.no_ignore_eos,
        shared_prefix_tokens=k.shared_prefix_tokens,
        prefix_groups=k.prefix_groups,
    )


def _dataset(k: Knobs) -> DatasetWorkload:
    if not k.dataset:
        raise UsageError("workload 'dataset' needs --dataset KIND:PATH (sharegpt, jsonl, csv, parquet, hf)")
    return DatasetWorkload(
        k.dataset,
        columns=k.dataset_columns,
        sample=k.dataset_sample,
        seed=k.seed,
        max_tokens=k.max_tokens,
    )


def _chat_session(k: Knobs) -> Workload:
    return ChatSessionWorkload(
        parse_dist(k.turns or "4", "--turns"),
        parse_dist(k.think_time, "--think-time", real=True),
        _dataset(k) if k.dataset else _synthetic(k),
        turns_given=k.turns is not None,
        max_tokens=k.max_tokens or 256,
    )


def _agent(k: Knobs) -> Workload:
    return AgentWorkload(
        parse_dist(k.agent_steps, "--agent-steps"),
        load_tools(k.tools),
        k.tool_choice,
        parse_dist(k.tool_result_tokens, "--tool-result-tokens"),
        parse_dist(k.tool_latency, "--tool-latency", real=True),
        max_tokens=k.max_tokens or 256,
        source=_dataset(k) if k.dataset else None,
        thinking_ratio=k.thinking_ratio or 0.0,
    )


WORKLOADS: dict[str, tuple[Callable[[Knobs], Workload], str]] = {
    "mixed": (_mixed, "80% direct answers (thinking off) + 20% thinking, max_tokens 1024 (seed 000 round 1)"),
    "short_qa": (_short_qa, "seed 000's short-output prompts, max_tokens 50"),
    "chat": (_chat, "general chat prompts (zh/en), max_tokens 150-256"),
    "rag": (_rag, "2-3k-token RAG prompts with a common prefix (prefix caching)"),
    "long_output": (_long_output, "summaries of shipped documents, ~500 output tokens"),
    "translate": (_translate, "one-sentence translations zh<->en, ~50 output tokens"),
    "custom": (_custom, "your prompts from --prompt-file (JSONL or CSV)"),
    "dataset": (_dataset, "rows of --dataset sharegpt:|jsonl:|csv:|parquet:|hf:PATH"),
    "synthetic": (_synthetic, "exact token lengths: --input-tokens DIST --output-tokens DIST, ignore_eos"),
    "chat_session": (
        _chat_session,
        "conversations: --turns DIST, --think-time DIST; each turn resends the history "
        "(user messages from --dataset, else synthetic)",
    ),
    "agent": (
        _agent,
        "tasks of tool-calling steps: --agent-steps DIST, --tools, --tool-choice, --tool-result-tokens "
        "DIST, --tool-latency DIST; each step resends the calls and their results (first messages from "
        "--dataset, else synthetic)",
    ),
}


def build(name: str, knobs: Knobs | None = None) -> Workload:
    try:
        factory = WORKLOADS[name][0]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}") from None
    return factory(knobs or Knobs())


def parse_mix(spec: str, knobs: Knobs | None = None) -> list[tuple[Workload, float]]:
    """`NAME` or `NAME:W,NAME:W` -> [(workload, weight)]. Raises UsageError on bad input."""
    if not spec or not str(spec).strip():
        raise UsageError(f"empty --workload; choose from {', '.join(WORKLOADS)}")
    seen: set[str] = set()
    out: list[tuple[Workload, float]] = []
    for item in str(spec).split(","):
        item = item.strip()
        name, sep, w = item.partition(":")
        name = name.strip()
        if not name:
            raise UsageError(f"bad --workload {spec!r}: empty name; use e.g. short_qa:3,chat:1")
        if name not in WORKLOADS:
            raise UsageError(
                f"unknown workload {name!r} in --workload {spec!r}; choose from {', '.join(WORKLOADS)}"
            )
        if name in seen:
            raise UsageError(f"workload {name!r} is listed twice in --workload {spec!r}")
        seen.add(name)
        weight = 1.0
        if sep:
            try:
                weight = float(w)
            except ValueError:
                weight = -1.0
            if not math.isfinite(weight) or weight <= 0:
                raise UsageError(
                    f"bad weight {w.strip()!r} for workload {name!r}: use a number > 0, e.g. {name}:2"
                )
        out.append((build(name, knobs), weight))
    return out


class Mix:
    """Weighted draw over workloads (one draw per request)."""

    def __init__(self, items: list[tuple[Workload, float]]) -> None:
        self.items = items
        self._cum: list[float] = []
        total = 0.0
        for _, w in items:
            total += w
            self._cum.append(total)
        self._total = total

    @classmethod
    def from_spec(cls, spec: str, knobs: Knobs | None = None) -> Mix:
        return cls(parse_mix(spec, knobs))

    def draw(self, rng: random.Random) -> Workload:
        if len(self.items) == 1:
            return self.items[0][0]
        return self.items[bisect.bisect_right(self._cum, rng.random() * self._total)][0]

    def next_request(self, rng: random.Random) -> LLMRequest:
        return self.draw(rng).next_request(rng)

    @property
    def needs_tokenizer(self) -> bool:
        return any(w.needs_tokenizer for w, _ in self.items)

    def prepare(self, tok: Any, *, chat: bool = True, worker: int = 0, progress: Any = None) -> None:
        """Prepare every workload of the mix (before the load; see Workload.prepare)."""
        for w, _ in self.items:
            if w.needs_tokenizer:
                w.prepare(tok, chat=chat, worker=worker, progress=progress or _log_progress)


def _log_progress(line: str) -> None:
    import logging

    logging.getLogger(__name__).info("%s", line)


def workload_draw(spec: str) -> Callable[[random.Random], tuple[list[str], int]]:
    """Requests drawn as `swarm run --workload SPEC` draws them: (pseudo-tokens, max_tokens)."""
    mix = Mix.from_spec(spec)
    if mix.needs_tokenizer:
        raise UsageError(
            f"--workload {spec}: it needs the server's tokenizer; the twin predicts built-in prompt sets"
        )

    def draw(rng: random.Random) -> tuple[list[str], int]:
        req = mix.next_request(rng)
        return chat_prompt_tokens(req.messages), req.max_tokens

    return draw
