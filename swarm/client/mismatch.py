"""A dialect that guessed wrong says so, once per process, in one line naming the remedy.

Auto-detection (swarm/client/dialects.py `detect_dialect`) reads `/v1/models`; a proxy, a renamed
owner or a `--dialect` given by hand can still pick a family whose stream is not the target's.
Most differences are harmless (the tally adapts to a running usage or its absence per stream),
but three would give wrong numbers without a word:

- `unread`: reasoning text arrives in a delta field the dialect does not read (`delta.reasoning`
  under the llamacpp, sglang or tgi dialect, `reasoning_content` under ollama's). Those chunks
  count as neither reasoning nor answer: TTFT, TTFA and reasoning tokens are wrong.
- `no_running_usage`: the dialect asked for a running usage on every chunk
  (`continuous_usage_stats`) and the stream had none: tokens per chunk and reasoning tokens are
  counted one per chunk, which multi-token chunks make wrong.
- `no_usage`: the stream finished without any usage chunk although every dialect asks for one
  (`include_usage`): the output tokens are a count of chunks.

The tally notes `unread` only on chunks it found no token in (a role or finish chunk when the
dialect is right: no per-token cost) and checks the other two once per request in `fill`
(swarm/client/tally.py). `warn_once` logs each (dialect, kind) once per process; `swarm run`'s
Locust processes write their logs to files, so it prints the distinct lines found in them once at
the end of the run (`logged_lines`, swarm/orchestrate/collect.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from swarm.client.dialects import DIALECTS, Dialect

log = logging.getLogger(__name__)

REASONING_FIELDS = ("reasoning", "reasoning_content")
"""Every delta field a family sends reasoning text in (docs/server-families.md)."""

_warned: set[tuple[str, str]] = set()


def unread_reasoning(delta: dict[str, object], read: tuple[str, ...]) -> str | None:
    """The reasoning field of `delta` that carries text and is not among `read`, or None."""
    for field in REASONING_FIELDS:
        if field not in read:
            value = delta.get(field)
            if value.__class__ is str and value:
                return field
    return None


def _others(pick: list[str]) -> str:
    return "|".join(pick)


def mismatch_line(dialect: Dialect, kind: str, field: str | None = None) -> str:
    """The one line that says what `dialect` misread (`kind`: unread, no_running_usage, no_usage)."""
    name = dialect.name
    if kind == "unread":
        readers = [n for n, d in DIALECTS.items() if field in d.reasoning_fields]
        return (
            f"the {name} dialect does not read delta.{field}, and the stream carries reasoning text "
            "there: those chunks count as neither reasoning nor answer (TTFT, TTFA and reasoning "
            f"tokens are wrong); the server is not {name}: pass --dialect {_others(readers)} "
            "(the dialects that read it), whichever is its family"
        )
    if kind == "no_running_usage":
        plain = [n for n, d in DIALECTS.items() if not d.continuous_usage]
        return (
            f"the {name} dialect asks for a running usage on every chunk (continuous_usage_stats) and "
            "the stream has none: tokens per chunk and reasoning tokens are counted one per chunk; "
            f"the server is not {name}: pass --dialect {_others(plain)}, whichever is its family"
        )
    if kind == "no_usage":
        others = [n for n in DIALECTS if n != name]
        return (
            f"the {name} dialect asks for a usage chunk (stream_options.include_usage) and the stream "
            "finished without one: output tokens are a count of chunks, exact only at one token per "
            f"chunk; if the server is another family, pass --dialect {_others(others)}"
        )
    raise ValueError(f"unknown mismatch kind {kind!r}")


def warn_once(dialect: Dialect, kind: str, field: str | None = None) -> bool:
    """Log `mismatch_line` the first time (dialect, kind) is seen in this process; True if logged."""
    key = (dialect.name, kind)
    if key in _warned:
        return False
    _warned.add(key)
    log.warning("%s", mismatch_line(dialect, kind, field))
    return True


def reset_warnings() -> None:
    """Forget what was said (a new run in the same process: tests, `swarm tune`'s runs are
    processes of their own)."""
    _warned.clear()


def logged_lines(logs: Iterable[str]) -> list[str]:
    """The distinct mismatch lines in the text of some process logs (Locust's format: `[time]
    host/WARNING/swarm.client.mismatch: LINE`), in the order first seen: one per run however many
    worker processes said it."""
    mark = f"/{__name__}: "
    seen: dict[str, None] = {}
    for text in logs:
        if mark not in text:
            continue
        for row in text.splitlines():
            _, found, line = row.partition(mark)
            if found:
                seen.setdefault(line.strip(), None)
    return list(seen)
