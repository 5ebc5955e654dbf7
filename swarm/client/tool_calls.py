"""Tool calls read from a stream: `delta.tool_calls` pieces assembled by index, then judged.

The OpenAI streaming shape, as vLLM writes it (vllm/entrypoints/openai/serving_chat.py 0.32,
`chat_completion_stream_generator`; `DeltaToolCall` in protocol.py, dumped with
`exclude_unset`): a call's first delta carries `index`, `id` (`chatcmpl-tool-<hex>`),
`type: "function"` and `function.name` (with its first `arguments` piece, maybe ""); later deltas
carry `index` and `function.arguments` pieces only; several calls in one answer have indexes 0,
1, ...; the finish is `tool_calls` under `auto` / `required` and `stop` under a named tool choice.
llama-server with `--jinja` streams the same shape in its own key order (common/chat.cpp
`common_chat_msg_diff_to_json_oaicompat` at ggml-org/llama.cpp 85c9a50: `index`, then `id` and
`type` on a call's first diff, `function.name` on the first, `function.arguments` on each).

A call is judged once the stream is over (`judge`): valid when its arguments parse as a JSON
object, its name is one of the request's tools, and the tool's schema's required fields are all
there. An invalid call is named by one short reason: `unclosed` (the arguments were cut: the
answer hit max_tokens mid-call), `bad_json`, `not_object`, `unknown_function`, `no_name`,
`missing_required`. Only agent steps build an assembler (swarm/client/tally.py `ToolTally`):
other requests never read `tool_calls`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

UNCLOSED = "unclosed"
BAD_JSON = "bad_json"
NOT_OBJECT = "not_object"
UNKNOWN_FUNCTION = "unknown_function"
NO_NAME = "no_name"
MISSING_REQUIRED = "missing_required"
REASONS = (UNCLOSED, BAD_JSON, NOT_OBJECT, UNKNOWN_FUNCTION, NO_NAME, MISSING_REQUIRED)

ARGUMENT_CHARS_MAX = 1 << 20
"""Characters of one call's arguments kept; past them the call is `unclosed` (bounded memory for
arguments that never close)."""


@dataclass(slots=True)
class AssembledCall:
    """One tool call as its deltas built it."""

    index: int
    id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)
    chars: int = 0

    @property
    def arguments(self) -> str:
        return "".join(self.parts)

    def message(self) -> dict[str, Any]:
        """The call as the assistant message of the next step carries it (OpenAI shape)."""
        return {
            "id": self.id or f"call-{self.index}",
            "type": "function",
            "function": {"name": self.name or "", "arguments": self.arguments},
        }


class ToolCallAssembler:
    """The calls of one answer, built from its `delta.tool_calls` lists in stream order."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[int, AssembledCall] = {}

    def feed(self, deltas: Any) -> bool:
        """Add one chunk's `delta.tool_calls`; False when it is not a list of call deltas."""
        if deltas.__class__ is not list:
            return False
        for d in deltas:
            if d.__class__ is not dict:
                return False
            index = d.get("index", 0)
            if index.__class__ is not int:
                return False
            call = self.calls.get(index)
            if call is None:
                call = self.calls[index] = AssembledCall(index)
            cid = d.get("id")
            if cid:
                call.id = str(cid)
            fn = d.get("function")
            if fn.__class__ is dict:
                name = fn.get("name")
                if name:
                    call.name = str(name) if call.name is None else call.name + str(name)
                piece = fn.get("arguments")
                if piece and call.chars <= ARGUMENT_CHARS_MAX:
                    call.parts.append(str(piece))
                    call.chars += len(piece)
        return True

    def ordered(self) -> list[AssembledCall]:
        return [self.calls[i] for i in sorted(self.calls)]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Of one answer's calls: how many, how many valid, the first invalid one's reason."""

    calls: int
    valid: int
    reason: str | None


def call_reason(call: AssembledCall, required: Mapping[str, tuple[str, ...]], cut: bool) -> str | None:
    """Why `call` is invalid (None: valid). `required`: tool name -> its required fields; `cut`:
    the answer ended by max_tokens (arguments that do not parse were cut, not malformed)."""
    if not call.name:
        return NO_NAME
    if call.chars > ARGUMENT_CHARS_MAX:
        return UNCLOSED
    try:
        args = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return UNCLOSED if cut else BAD_JSON
    if not isinstance(args, dict):
        return NOT_OBJECT
    fields = required.get(call.name)
    if fields is None:
        return UNKNOWN_FUNCTION
    if any(f not in args for f in fields):
        return MISSING_REQUIRED
    return None


def judge(
    calls: list[AssembledCall], required: Mapping[str, tuple[str, ...]], finish_reason: str | None
) -> Verdict:
    """The verdict on one answer's calls; a stream that ended without its finish counts as cut."""
    cut = finish_reason in (None, "length")
    valid, first = 0, None
    for c in calls:
        reason = call_reason(c, required, cut)
        if reason is None:
            valid += 1
        elif first is None:
            first = reason
    return Verdict(len(calls), valid, first)


__all__ = [
    "ARGUMENT_CHARS_MAX",
    "REASONS",
    "AssembledCall",
    "ToolCallAssembler",
    "Verdict",
    "call_reason",
    "judge",
]
