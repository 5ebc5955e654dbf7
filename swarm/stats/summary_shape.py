"""summary.json's shape held against its types (swarm/stats/summary.py's `Summary` and the TypedDicts
under it), for a reader given a file it did not write: valid JSON of another shape (`{"stages": 5}`)
is named in one line instead of failing deep in a reader.

Keys a file lacks are not asked for (older files lack some, and every reader reads with .get); keys
the types do not name (a workload's Block, a newer file's) are not looked at; `Any` is not looked into.
A value at a key the types name must be of its type: an int is a float, a bool is neither.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from swarm.stats.summary import Summary


def problem(data: object) -> str | None:
    """What is wrong with a summary's shape ("stages[0].total is a number, not an object"), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    return _problem(data, Summary, "")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


@functools.cache
def _fields(typed: type) -> dict[str, Any]:
    return get_type_hints(typed)  # NotRequired[...] is taken off


_SCALARS: dict[Any, tuple[str, tuple[type, ...]]] = {
    str: ("a string", (str,)),
    bool: ("a boolean", (bool,)),
    int: ("a whole number", (int,)),
    float: ("a number", (int, float)),
}


def _problem(value: object, hint: Any, where: str) -> str | None:
    """`value` against `hint`: the first thing wrong, named by its path (`where`), or None."""
    origin = get_origin(hint)
    if hint is Any:
        return None
    if origin in (Union, types.UnionType):
        found = [_problem(value, h, where) for h in get_args(hint)]
        return None if None in found else next(f for f in found if f is not None)
    if hint is type(None):
        return None if value is None else f"{where} is {_kind(value)}, not null"
    if is_typeddict(hint) or origin in (dict, Mapping):
        if not isinstance(value, dict):
            return f"{where} is {_kind(value)}, not an object"
        for key, item in value.items():
            sub = _fields(hint).get(key) if is_typeddict(hint) else get_args(hint)[1]
            found = None if sub is None else _problem(item, sub, f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if origin is list:
        if not isinstance(value, list):
            return f"{where} is {_kind(value)}, not a list"
        return next(
            (f for i, v in enumerate(value) if (f := _problem(v, get_args(hint)[0], f"{where}[{i}]"))), None
        )
    name, kinds = _SCALARS[hint]
    if isinstance(value, kinds) and (hint is bool or not isinstance(value, bool)):
        return None
    return f"{where} is {_kind(value)}, not {name}"
