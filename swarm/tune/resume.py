"""`swarm tune --resume DIR`: the earlier tune read back and held against this one.

A configuration measured already is skipped on --resume, so its record must have come from what this
tune would measure: the same base command, the same swarm run options (as swarm run reads them: -u
and --users are one option, their order aside), the same planned configurations, GPUs and price.
Any difference is one line naming each one (then -> now) and exit 2, unless --resume-anyway: then
the earlier setting is kept in tune.json's `earlier` with the names of the configurations measured
under it, and what this tune measures is recorded under the new one.
"""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swarm.core.errors import UsageError
from swarm.core.runfiles import TUNE_JSON
from swarm.tune.results import ConfigResult, TuneResult, TuneSetting, read_tune_json

SHOWN_NAMES = 3  # configurations named in a line that says which were added or dropped


@dataclass
class Resumed:
    """What --resume takes from the earlier tune."""

    done: dict[str, ConfigResult] = field(default_factory=dict)  # name -> its "ok" record
    earlier: list[TuneSetting] = field(default_factory=list)  # for tune.json's `earlier`


@functools.cache
def _run_options() -> tuple[dict[str, str], frozenset[str]]:
    """swarm run's option strings -> the longest of each option's spellings; those taking no value."""
    import argparse

    from swarm.orchestrate.run import configure as run_configure

    parser = argparse.ArgumentParser(add_help=False)
    run_configure(parser)
    names, alone = {}, set()
    for action in parser._actions:
        for s in action.option_strings:
            names[s] = max(action.option_strings, key=len)
            if action.nargs == 0:
                alone.add(s)
    return names, frozenset(alone)


def run_options(run_argv: Sequence[str]) -> dict[str, list[str]]:
    """The handed-on swarm run options as option -> its values in order ("" for one alone), each
    under its longest spelling (-u 4 and --users 4 are one option)."""
    names, alone = _run_options()
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(run_argv):
        tok = run_argv[i]
        takes = tok not in alone and i + 1 < len(run_argv)
        out.setdefault(names.get(tok, tok), []).append(run_argv[i + 1] if takes else "")
        i += 2 if takes else 1
    return out


def _values(vals: list[str] | None) -> str:
    if not vals:
        return "unset"
    return " ".join(shlex.quote(v) if v else "(set)" for v in vals)


def option_changes(then: Sequence[str], now: Sequence[str]) -> list[str]:
    """ "--users 4 -> 8" for each swarm run option given otherwise, in the order first seen."""
    old, new = run_options(then), run_options(now)
    return [
        f"{opt} {_values(old.get(opt))} -> {_values(new.get(opt))}"
        for opt in dict.fromkeys([*old, *new])
        if old.get(opt) != new.get(opt)
    ]


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def differences(done: TuneResult, now: TuneSetting) -> list[str]:
    """What differs between the earlier tune and this one, each as "what then -> now"."""
    out = []
    if done.serve_cmd != now.serve_cmd:
        out.append(f"base command {shlex.join(done.serve_cmd)!r} -> {shlex.join(now.serve_cmd)!r}")
    if done.run_argv is not None and now.run_argv is not None:
        changes = option_changes(done.run_argv, now.run_argv)
        if changes:
            out.append("swarm run options " + ", ".join(changes))
    if done.planned is not None and now.planned is not None and set(done.planned) != set(now.planned):
        added = [n for n in now.planned if n not in done.planned]
        dropped = [n for n in done.planned if n not in now.planned]
        what = [f"added {_names(added)}"] if added else []
        what += [f"dropped {_names(dropped)}"] if dropped else []
        out.append(f"configurations {len(done.planned)} -> {len(now.planned)} ({'; '.join(what)})")
    if done.gpus != now.gpus:
        out.append(f"--gpus {done.gpus} -> {now.gpus}")
    if done.gpu_hourly_cost != now.gpu_hourly_cost:
        out.append(f"--gpu-hourly-cost {done.gpu_hourly_cost} -> {now.gpu_hourly_cost}")
    return out


def _read(resume: Path) -> TuneResult:
    path = resume / TUNE_JSON
    if not path.is_file():
        raise UsageError(f"--resume {resume}: no {TUNE_JSON} there")
    try:
        done = read_tune_json(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"--resume {resume}: {TUNE_JSON} unreadable ({e})") from None
    for what, value in (("run_argv", done.run_argv), ("planned", done.planned)):
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise UsageError(f"--resume {resume}: {TUNE_JSON} unreadable ({what} is not a list of strings)")
    return done


def resumed(resume: Path, now: TuneSetting, anyway: bool) -> Resumed:
    """The earlier tune's measured configurations, once it is held against `now` (see the module's
    docstring): UsageError on a difference unless `anyway`."""
    done = _read(resume)
    changed = differences(done, now)
    if changed and not anyway:
        raise UsageError(
            f"--resume {resume}: this tune is not the one there: {'; '.join(changed)}; give the same, "
            "or --resume-anyway to go on (tune.json keeps both)"
        )
    if done.run_argv is None or done.planned is None:
        print(
            f"swarm tune: --resume {resume}: its {TUNE_JSON} (an older swarm's) does not record the swarm "
            "run options or the configurations: only the base command, GPUs and price are checked",
            file=sys.stderr,
        )
    ok = {c.name: c for c in done.configs if c.status == "ok"}
    earlier = list(done.earlier)
    if changed:
        before = {n for e in earlier for n in e.configs}
        measured = [n for n in ok if n not in before]
        then = TuneSetting(
            done.serve_cmd, done.run_argv, done.planned, done.gpus, done.gpu_hourly_cost, measured
        )
        earlier.append(then)
        print(
            f"swarm tune: --resume-anyway: {len(measured)} configurations measured under the earlier "
            f"setting kept as they are ({'; '.join(changed)})",
            file=sys.stderr,
        )
    return Resumed(ok, earlier)
