"""`swarm tune`'s plan, pure: the configurations (a grid's cross product or a --configs file), their
names, the command that starts each one, and which server family a command is.

A configuration is the flags added to the base command, as written on a command line:
{"--max-num-seqs": "64", "-np": "4"}; a flag that takes no value has the value "" (written alone).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from swarm.core.errors import UsageError

Flags = dict[str, str]
LOOPBACK = "127.0.0.1"


def flag_of(key: str) -> str:
    """A KEY as its flag: written with its dashes it is taken as written; otherwise one or two
    letters get one dash (np -> -np, c -> -c, ub -> -ub), longer ones two (max-num-seqs ->
    --max-num-seqs); underscores are dashes (max_num_seqs, as in vllm bench sweep's serve.json)."""
    key = key.strip()
    if key.startswith("-"):
        return key
    if not key or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", key):
        raise UsageError(f"bad flag name {key!r}: e.g. max-num-seqs, np, --cache-type-k")
    key = key.replace("_", "-")
    return f"-{key}" if len(key) <= 2 else f"--{key}"


def parse_grid(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """`--grid KEY=V1,V2` (repeatable): each as (flag, values), in the order given."""
    grid: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, values = spec.partition("=")  # --grid=-np=1,4: the key keeps its dash
        vals = [v.strip() for v in values.split(",")]
        if not sep or not key.strip() or not all(vals):
            raise UsageError(f"bad --grid {spec!r}: KEY=V1,V2, e.g. max-num-seqs=64,256")
        flag = flag_of(key)
        if any(f == flag for f, _ in grid):
            raise UsageError(f"--grid names {flag} twice: give its values in one --grid")
        twice = next((v for i, v in enumerate(vals) if v in vals[:i]), None)
        if twice is not None:
            raise UsageError(
                f"bad --grid {spec!r}: the value {twice} is given twice (one configuration each)"
            )
        grid.append((flag, vals))
    return grid


def grid_configs(grid: Sequence[tuple[str, Sequence[str]]]) -> list[Flags]:
    """The cross product, the first --grid varying slowest; one empty configuration without a grid."""
    flags = [f for f, _ in grid]
    return [dict(zip(flags, combo, strict=True)) for combo in itertools.product(*(v for _, v in grid))]


def _value(flag: str, value: object, where: str) -> tuple[str, str]:
    if isinstance(value, bool):  # true: the flag alone; false: its --no- form (vLLM's booleans)
        if value:
            return flag, ""
        return ("--no-" + flag.lstrip("-")), ""
    if isinstance(value, (int, float, str)):
        return flag, str(value)
    raise UsageError(f"{where}: {flag}'s value {value!r} is not a number, string or boolean")


def parse_configs(text: str, source: str) -> list[Flags]:
    """A --configs file: a JSON list of objects {flag-or-key: value}."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"--configs {source}: not JSON ({e})") from None
    if not isinstance(data, list) or not data or not all(isinstance(d, dict) for d in data):
        raise UsageError(
            f'--configs {source}: a non-empty JSON list of objects, e.g. [{{"max-num-seqs": 64}}]'
        )
    configs = []
    for i, obj in enumerate(data, 1):
        configs.append(
            dict(_value(flag_of(str(k)), v, f"--configs {source} entry {i}") for k, v in obj.items())
        )
    return configs


def check_distinct(configs: Sequence[Flags], source: str) -> None:
    """UsageError when two configurations share a name or a run directory (`dir_name`): the second
    would overwrite the first's records and both would read as one."""
    names: set[str] = set()
    dirs: dict[str, str] = {}
    for flags in configs:
        name = config_name(flags)
        if name in names:
            raise UsageError(f"{source}: the configuration {name!r} is given twice")
        other = dirs.get(dir_name(name))
        if other is not None:
            raise UsageError(
                f"{source}: the configurations {other!r} and {name!r} would share one run directory "
                f"({dir_name(name)}): name them apart"
            )
        names.add(name)
        dirs[dir_name(name)] = name


def read_configs(path: Path) -> list[Flags]:
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"--configs {path}: {e.strerror or e}") from None
    return parse_configs(text, str(path))


def config_name(flags: Flags) -> str:
    """ "max-num-seqs=64 gpu-memory-utilization=0.90": the flags without their dashes; "base" if none."""
    parts = [f.lstrip("-") + (f"={v}" if v != "" else "") for f, v in flags.items()]
    return " ".join(parts) or "base"


def dir_name(name: str) -> str:
    """A configuration's name as a directory name (its run under DIR/configs/)."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", name.replace(" ", "__")).strip("_") or "base"


def _takes_value(argv: Sequence[str], i: int) -> bool:
    """Whether argv[i] (a flag without '=') is followed by its value rather than by another flag."""
    if i + 1 >= len(argv):
        return False
    nxt = argv[i + 1]
    return not nxt.startswith("-") or re.fullmatch(r"-\d[\d.eE+-]*", nxt) is not None


def base_flags(serve_cmd: Sequence[str]) -> Flags:
    """The flags a base command sets (as flag -> value, "" for a flag alone)."""
    flags: Flags = {}
    i = 0
    while i < len(serve_cmd):
        tok = serve_cmd[i]
        if tok.startswith("-") and not re.fullmatch(r"-\d[\d.eE+-]*", tok):
            flag, eq, value = tok.partition("=")
            if eq:
                flags[flag] = value
            elif _takes_value(serve_cmd, i):
                flags[flag] = serve_cmd[i + 1]
                i += 1
            else:
                flags[flag] = ""
        i += 1
    return flags


def _without(argv: Sequence[str], drop: Collection[str]) -> list[str]:
    """argv without the flags in `drop` (with their values, `--f v` or `--f=v`)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        flag = tok.partition("=")[0]
        if tok.startswith("-") and flag in drop:
            i += 2 if "=" not in tok and _takes_value(argv, i) else 1
            continue
        out.append(tok)
        i += 1
    return out


def _append(argv: list[str], flags: Flags) -> list[str]:
    for flag, value in flags.items():
        argv += [flag] if value == "" else [flag, value]
    return argv


def serve_command(base: Sequence[str], flags: Flags, port: int) -> list[str]:
    """The base command with the configuration's flags (one already in the base is replaced, not
    duplicated), `--port PORT` and, unless the base names its own, `--host 127.0.0.1`."""
    drop = set(flags) | {"--port"}
    argv = _append(_without(base, drop), flags)
    argv += ["--port", str(port)]
    if "--host" not in base_flags(argv):
        argv += ["--host", LOOPBACK]
    return argv


def family_of(serve_cmd: Sequence[str]) -> str:
    """ "llamacpp" for llama-server (or the simulator with --server llamacpp), "vllm" otherwise."""
    if serve_cmd and Path(serve_cmd[0]).name.startswith("llama-server"):
        return "llamacpp"
    if base_flags(serve_cmd).get("--server") == "llamacpp" and "sim" in serve_cmd:
        return "llamacpp"
    return "vllm"


def pending(configs: Sequence[Flags], done: Collection[str]) -> list[Flags]:
    """The configurations still to measure: those whose name is not among `done` (--resume)."""
    return [c for c in configs if config_name(c) not in done]
