"""The simulator's tool calls: a request's `tools` and `tool_choice` read, the answer's calls
drawn, and their SSE chunks in vLLM's shape.

What vLLM (0.32) does, and the simulator after it (vllm/entrypoints/openai/serving_chat.py,
`chat_completion_stream_generator`; protocol.py `DeltaToolCall`, dumped with `exclude_unset`):
a call's first chunk carries `{"tool_calls":[{"id":"chatcmpl-tool-<32 hex>","type":"function",
"index":I,"function":{"name":NAME,"arguments":PIECE}}]}`, each later token's chunk
`{"tool_calls":[{"index":I,"function":{"arguments":PIECE}}]}`; the finish is `tool_calls` under
`auto` / `required` and `stop` under a named tool choice (`length` when max_tokens cuts the
arguments, which then never close). A named choice always calls that tool (vLLM's guided
decoding makes even a tiny model answer valid arguments); `required` always calls one of the
tools; `auto` calls at the profile's `[tools] call_rate` (else the answer is text); `none` never.

A call's arguments are a JSON object holding the tool schema's required fields (strings filled
with words to the profile's `[tools] arguments` size in tokens; other types one token), streamed
one piece per token, so the answer's completion tokens are its argument pieces: the usage the
client reads and the trace's `completion_tokens` agree.

llama-server (`--jinja`; common/chat.cpp `common_chat_msg_diff_to_json_oaicompat` and
`common_chat_tool_choice_parse_oaicompat`, read at ggml-org/llama.cpp 85c9a50) streams the same
deltas with its own key order (`index`, then `id` and `type` on a call's first diff, then
`function` with `name` on the first and `arguments` on every one) and the finish `tool_calls` on
its own `delta: {}` event; its tool choice is a string (auto, none, required; anything else
"Invalid tool_choice: ..."), and a named choice, an object, is read as `auto` (the server's
`json_value` falls back to the default for a value of another type).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import orjson

_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "north", "south", "river", "stone", "cloud")
_SCALARS = {"integer": "7", "number": "1.5", "boolean": "true", "array": "[]", "object": "{}", "null": "null"}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One offered function: its name and its required fields with their JSON types."""

    name: str
    required: tuple[tuple[str, str], ...]  # (field, JSON type; "string" when the schema says none)


@dataclass(frozen=True, slots=True)
class Call:
    """One planned call: its id, its function and its argument pieces (one token each)."""

    id: str
    name: str
    pieces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """An answer of tool calls: its calls, and whether the choice was named (finish `stop`)."""

    calls: tuple[Call, ...]
    named: bool

    @property
    def tokens(self) -> int:
        return sum(len(c.pieces) for c in self.calls)

    def calls_started(self, tokens: int) -> int:
        """Calls whose first piece is among the first `tokens` tokens sent."""
        n, at = 0, 0
        for c in self.calls:
            if at >= tokens:
                break
            n += 1
            at += len(c.pieces)
        return n


def read_tools(tools: Any) -> tuple[ToolSpec, ...] | None:
    """The functions of a request's `tools` (None: no tools); a malformed entry raises ValueError
    with the reason."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ValueError("tools must be a list")
    specs = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}")
        params = fn.get("parameters") or {}
        props = params.get("properties") or {} if isinstance(params, dict) else {}
        required = params.get("required") or [] if isinstance(params, dict) else []
        fields = tuple(
            (str(f), str((props.get(f) or {}).get("type", "string")) if isinstance(props, dict) else "string")
            for f in required
        )
        specs.append(ToolSpec(fn["name"], fields))
    return tuple(specs)


def read_choice(choice: Any, tools: tuple[ToolSpec, ...] | None) -> str:
    """`tool_choice` as one word: none, auto, required, or the named function's name. Raises
    ValueError for a choice vLLM refuses (a name not among the tools, a choice without tools)."""
    if choice is None:
        return "auto" if tools else "none"
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise ValueError(f"tool_choice {choice!r} is not none, auto, required or a named function")
        if choice != "none" and not tools:
            raise ValueError("When using `tool_choice`, `tools` must be set.")
        return choice
    fn = choice.get("function") if isinstance(choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise ValueError("tool_choice must name a function: {'type': 'function', 'function': {'name': ...}}")
    if not tools or name not in {t.name for t in tools}:
        raise ValueError(f"Tool '{name}' has not been passed in `tools`.")
    return name


def arguments(spec: ToolSpec, size: int, rng: random.Random) -> tuple[str, ...]:
    """The argument pieces of one call: a JSON object of the required fields, about `size` tokens
    (never fewer than the fields need), one piece a token."""
    fields = spec.required
    strings = [i for i, (_, kind) in enumerate(fields) if kind == "string"]
    fixed = 2 + 2 * len(fields)  # { and }, and a key and a value each
    extra = max(0, size - fixed)
    pieces = ["{"]
    for i, (name, kind) in enumerate(fields):
        pieces.append((", " if i else "") + orjson.dumps(name).decode() + ": ")
        if kind != "string":
            pieces.append(_SCALARS.get(kind, "null"))
            continue
        n = 1 + (extra if i == strings[0] else 0)
        words = [rng.choice(_WORDS) for _ in range(n)]
        if n == 1:
            pieces.append('"' + words[0] + '"')
        else:
            pieces += ['"' + words[0], *(" " + w for w in words[1:-1]), " " + words[-1] + '"']
    pieces.append("}")
    return tuple(pieces)


def plan(
    rng: random.Random,
    tools: tuple[ToolSpec, ...] | None,
    choice: str,
    call_rate: float,
    size: int,
    calls: int,
    id_prefix: str = "chatcmpl-tool-",
) -> ToolPlan | None:
    """This answer's calls (None: it answers with text). `size`: argument tokens per call drawn
    from the profile; `calls`: calls in the answer (only `auto` / `required` call several)."""
    if not tools or choice == "none":
        return None
    if choice == "auto" and rng.random() >= call_rate:
        return None
    named = choice not in ("auto", "required")
    if named:
        picked = [next(t for t in tools if t.name == choice)]
    else:
        picked = [rng.choice(tools) for _ in range(max(1, calls))]
    return ToolPlan(
        tuple(
            Call(f"{id_prefix}{rng.getrandbits(128):032x}", t.name, arguments(t, size, rng)) for t in picked
        ),
        named,
    )


def token_chunks(plan: ToolPlan, llamacpp: bool = False) -> tuple[bytes, ...]:
    """The `delta` JSON of each token of `plan`, in order (a call's first carries id, type, name),
    in vLLM's key order or (`llamacpp`) llama-server's."""
    out: list[bytes] = []
    for i, c in enumerate(plan.calls):
        for k, piece in enumerate(c.pieces):
            args = orjson.dumps(piece)
            if k == 0:
                cid = c.id.encode()
                head = (
                    b'{"index":%d,"id":"%s","type":"function","function":{"name":' % (i, cid)
                    if llamacpp
                    else b'{"id":"%s","type":"function","index":%d,"function":{"name":' % (cid, i)
                )
                out.append(
                    b'{"tool_calls":[' + head + orjson.dumps(c.name) + b',"arguments":' + args + b"}}]}"
                )
            else:
                out.append(b'{"tool_calls":[{"index":%d,"function":{"arguments":' % i + args + b"}}]}")
    return tuple(out)


def read_llamacpp_choice(choice: Any, tools: tuple[ToolSpec, ...] | None) -> str:
    """llama-server's tool choice: a string of three (else ValueError "Invalid tool_choice: ..."),
    any other value read as auto; none without tools."""
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ValueError(f"Invalid tool_choice: {choice}")
        return choice if tools else "none"
    return "auto" if tools else "none"


__all__ = [
    "Call",
    "ToolPlan",
    "ToolSpec",
    "arguments",
    "plan",
    "read_choice",
    "read_llamacpp_choice",
    "read_tools",
    "token_chunks",
]
