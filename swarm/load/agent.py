"""The `agent` workload: tasks of tool-calling steps, one task at a time per Locust user.

A task is a loop (GuideLLM's tool-call turns, inference-perf's agent traces, measured here under
load): each step is a streamed chat request with `tools` and `--tool-choice`; the model answers
with tool calls, the client runs the (mocked) tools and sends their results back, the model goes
on, until it answers without a call. So the prompt grows with each step (the assistant message
with its calls, then one `tool` message per call), the prefix (tools, first message, earlier
steps) is shared across steps, and the time that matters is the task's.

- `--agent-steps DIST`: the most steps a task takes. Steps 1..N-1 send `--tool-choice`; step N
  sends `tool_choice: "none"` (the final answer), so a model that always calls makes tasks of N
  steps, and one that answers without a call (under `auto`) ends its task early.
- `--tools builtin|FILE`: the functions offered (a JSON list of OpenAI tools, each's `parameters`
  checked as the JSON Schema a function takes: an object schema whose `properties` are schemas
  and whose `required` names them). `--tool-choice auto|required|NAME` (NAME: one of them).
- A task's first messages: a row of `--dataset` (users' own task files: any dataset kind with a
  `prompt` or `messages` column, swarm/load/dataset.py), else a short synthetic instruction.
- Each call gets one `tool` message of `--tool-result-tokens DIST` tokens (pseudo-tokens, exact:
  swarm/core/tokens.py), after `--tool-latency DIST` (durations): the tool's time, counted in the
  task, never in a request.

The user (swarm/live/user.py) sends the steps, judges the calls (swarm/client/tool_calls.py) and
sleeps the tools' time; this module keeps the task's messages and builds each step's request.
A task's duration runs from its first step's send to its last step's end: the sum of its steps'
E2E and tool times (the records' `e2e_s` and `tool_s`; a step's `tool_s` is the time from the last
step's end to its send, the mocked latency plus the client's own time between the two).
"""

from __future__ import annotations

import json
import random
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.tokenizer import Tokenizer
from swarm.load.dataset import DatasetWorkload
from swarm.load.dists import Dist
from swarm.load.request import LLMRequest, Messages

TOOL_CHOICES = ("auto", "required")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for a function name
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


def _fn(name: str, description: str, props: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v} for k, v in props.items()},
                "required": required,
            },
        },
    }


BUILTIN_TOOLS: list[dict[str, Any]] = [
    _fn("get_weather", "Current weather of a city", {"city": "string", "days": "integer"}, ["city"]),
    _fn("search_web", "Search the web and return the top results", {"query": "string"}, ["query"]),
    _fn("read_file", "Read a file of the workspace", {"path": "string", "lines": "integer"}, ["path"]),
    _fn("run_sql", "Run a read-only SQL query", {"query": "string", "limit": "integer"}, ["query", "limit"]),
]
"""`--tools builtin`: four functions an agent benchmark commonly offers."""


@dataclass(frozen=True)
class Toolset:
    """The functions offered: as sent (`tools`) and what a valid call must hold (`required`)."""

    tools: list[dict[str, Any]]
    required: dict[str, tuple[str, ...]]  # function name -> its required fields


def _check_schema(where: str, schema: Any) -> None:
    """The JSON Schema a function's `parameters` must be, checked: one line naming what is wrong."""
    if not isinstance(schema, dict):
        raise UsageError(f"{where}: parameters must be a JSON Schema object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object":
        raise UsageError(f"{where}: parameters must be a schema of type object, got {schema.get('type')!r}")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise UsageError(f"{where}: parameters.properties must be an object of schemas")
    for key, sub in props.items():
        if not isinstance(sub, dict):
            raise UsageError(f"{where}: parameters.properties.{key} must be a schema (an object)")
        kind = sub.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
        if any(k not in _JSON_TYPES for k in kinds):
            raise UsageError(
                f"{where}: parameters.properties.{key}.type {kind!r} is not a JSON Schema type "
                f"({', '.join(_JSON_TYPES)})"
            )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UsageError(f"{where}: parameters.required must be a list of property names")
    if missing := [r for r in required if r not in props]:
        raise UsageError(f"{where}: parameters.required names {missing}, not among its properties")


def toolset(tools: Any, source: str) -> Toolset:
    """Check a list of OpenAI tools (`source`: where it came from, for the error line)."""
    if not isinstance(tools, list) or not tools:
        raise UsageError(f"--tools {source}: give a non-empty JSON list of tools")
    required: dict[str, tuple[str, ...]] = {}
    for i, t in enumerate(tools):
        where = f"--tools {source}: tool {i}"
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            raise UsageError(f'{where} must be {{"type": "function", "function": {{"name", "parameters"}}}}')
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise UsageError(f"{where}: function.name must be 1-64 letters, digits, _ or -, got {name!r}")
        if name in required:
            raise UsageError(f"{where}: function {name!r} is listed twice")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        _check_schema(f"{where} ({name})", params)
        required[name] = tuple(params.get("required", []))
    return Toolset(tools, required)


def load_tools(spec: str) -> Toolset:
    """`--tools builtin` or a JSON file of tools."""
    if spec == "builtin":
        return toolset(BUILTIN_TOOLS, spec)
    try:
        data = json.loads(Path(spec).read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"--tools {spec}: cannot read: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--tools {spec}: not valid JSON: {e}") from None
    return toolset(data, spec)


def tool_choice(choice: str, tools: Toolset) -> str | dict[str, Any]:
    """`--tool-choice` as sent: auto, required, or `{"type": "function", "function": {"name"}}`."""
    if choice in TOOL_CHOICES:
        return choice
    if choice not in tools.required:
        raise UsageError(
            f"--tool-choice {choice!r}: not auto, required nor one of the tools ({', '.join(tools.required)})"
        )
    return {"type": "function", "function": {"name": choice}}


def result_text(tokens: int, rng: random.Random) -> str:
    """A mocked tool result of exactly `tokens` pseudo-tokens (a space and 4 letters: one token)."""
    letters = string.ascii_lowercase
    return "".join(" " + "".join(rng.choices(letters, k=4)) for _ in range(tokens))


class AgentTask:
    """One task: its messages, the steps still to send, and what the user measured of it."""

    __slots__ = (
        "ended",
        "id",
        "last_end",
        "messages",
        "planned",
        "step",
        "t_start",
        "thinking",
        "workload",
    )

    def __init__(
        self, workload: AgentWorkload, task_id: str, planned: int, first: Messages, thinking: bool = False
    ) -> None:
        self.workload = workload
        self.id = task_id
        self.planned = planned
        self.thinking = thinking  # every step of the task with thinking on (--thinking-ratio), or off
        self.messages: Messages = list(first)
        self.step = 0  # steps answered so far
        self.ended = False
        self.t_start: float | None = None  # perf_counter() of the first step's send (the user's)
        self.last_end: float | None = None  # perf_counter() of the last step's end

    @property
    def last_step(self) -> bool:
        """Whether the next step is the task's last planned one (sent with tool_choice none)."""
        return self.step + 1 >= self.planned

    @property
    def requires_call(self) -> bool:
        """Whether the next step must call a tool (required or named, and not the last step)."""
        return self.workload.choice != "auto" and not self.last_step

    def next_request(self) -> LLMRequest:
        w = self.workload
        return LLMRequest(
            workload=w.name,
            messages=list(self.messages),
            max_tokens=w.max_tokens,
            tools=w.tools.tools,
            tool_choice="none" if self.last_step else w.sent_choice,
            thinking=self.thinking,
        )

    def answered(self, calls: list[dict[str, Any]], rng: random.Random) -> None:
        """The step was answered with `calls` (OpenAI `tool_calls` items; [] for none): the assistant
        message and one tool result each join the messages; no call ends the task."""
        self.step += 1
        if not calls or self.step >= self.planned:
            self.ended = True
            return
        self.messages.append(
            {"role": "assistant", "content": "", "tool_calls": calls}
        )  # "" not null: every template takes it
        tokens = self.workload.result_tokens
        for c in calls:
            self.messages.append(
                {"role": "tool", "tool_call_id": c["id"], "content": result_text(tokens.draw(rng), rng)}
            )

    def failed(self) -> None:
        """The step failed (or was cut): no answer to go on with, the task is over."""
        self.step += 1
        self.ended = True


class AgentWorkload:
    """Tasks of tool-calling steps (see the module docstring)."""

    name = "agent"
    agent = True  # the user runs an AgentTask per arrival (swarm/live/user.py)

    def __init__(
        self,
        steps: Dist,
        tools: Toolset,
        choice: str,
        result_tokens: Dist,
        latency: Dist,
        *,
        max_tokens: int = 256,
        source: DatasetWorkload | None = None,
        thinking_ratio: float = 0.0,
    ) -> None:
        self.steps = steps
        self.tools = tools
        self.choice = choice  # auto | required | a function's name
        self.sent_choice = tool_choice(choice, tools)
        self.result_tokens = result_tokens
        self.latency = latency
        self.max_tokens = max_tokens
        self.source = source  # --dataset: each task's first messages
        # the share of tasks run with thinking on (--thinking-ratio); the others say thinking off, as
        # every workload but mixed does: a reasoning parser would otherwise take a thinking model's
        # whole answer, its calls' arguments too, for reasoning (vLLM's qwen3 parser did)
        self.thinking_ratio = thinking_ratio
        self._n = 0

    def __repr__(self) -> str:
        return f"<AgentWorkload steps {self.steps} tools {list(self.tools.required)} choice {self.choice}>"

    @property
    def needs_tokenizer(self) -> bool:
        return self.source is not None and self.source.needs_tokenizer

    def prepare(self, tok: Tokenizer, **kwargs: Any) -> object:
        return None if self.source is None else self.source.prepare(tok, **kwargs)

    def tool_latency(self, rng: random.Random) -> float:
        """Seconds the tools of one step take (a draw of --tool-latency)."""
        return self.latency.draw_real(rng)

    def start(self, rng: random.Random, task_id: str) -> AgentTask:
        """A new task for one user."""
        if self.source is not None:
            first = self.source.next_row().messages
        else:
            text = f"Task {task_id}: find what is asked with the tools, then answer." + result_text(16, rng)
            first = [{"role": "user", "content": text}]
        thinking = self.thinking_ratio > 0.0 and rng.random() < self.thinking_ratio
        return AgentTask(self, task_id, self.steps.draw(rng), first, thinking)

    def next_request(self, rng: random.Random) -> LLMRequest:
        """A single step (the first of a fresh task), for callers without tasks."""
        self._n += 1
        return self.start(rng, f"single-{self._n}").next_request()


__all__ = ["BUILTIN_TOOLS", "AgentTask", "AgentWorkload", "Toolset", "load_tools", "tool_choice", "toolset"]
