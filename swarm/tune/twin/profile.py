"""A twin's profile file: the fitted parameters as a simulator profile TOML, each with its evidence.

`write_twin` turns an swarm/tune/twin/fit.py `TwinFit` into the simulator profile's tables
(`[engine]`, `[step]`, `[lengths]`) plus a `[twin]` table: the run it was fitted from, the most
running sequences it reached, and per parameter its value, status (fitted / extrapolated /
refused), evidence and fit quality. `read_twin` gives back the `Profile` and that table; a refused
parameter is left out of the profile tables (a prediction that needs it must be given it).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.sim.profile import Profile, parse_profile
from swarm.tune.twin.fit import REFUSED, Param, TwinFit


@dataclass(frozen=True)
class Twin:
    profile: Profile
    params: dict[str, Param]
    running_reached: float | None
    run: str
    gap_s: float | None = None  # client.gap_s: each request's time outside the engine
    prompt_tokens: float | None = None  # lengths.prompt_tokens: the server's mean count of a prompt
    workloads: tuple[str, ...] = ()  # the fitted run's workloads (what prompt_tokens counted)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return json.dumps(str(v), ensure_ascii=False)  # a TOML basic string


def twin_toml(fit: TwinFit, name: str, run: str) -> str:
    """The profile text: each fitted field with its evidence as a comment, then the [twin] table."""
    tables: dict[str, list[str]] = {"engine": [], "step": []}
    for p in fit.params.values():
        table, _, key = p.name.partition(".")
        if table not in tables or p.status == REFUSED or p.value is None:
            continue
        tables[table].append(f"# {p.status}: {p.evidence} ({p.quality})")
        tables[table].append(f"{key} = {_toml(p.value)}")
    lines = [
        f"name = {_toml(name)}",
        f"description = {_toml(f'digital twin fitted from {run} by swarm twin fit')}",
    ]
    for table, body in tables.items():
        lines += ["", f"[{table}]", *body]
    if fit.output_lengths:
        lines += ["", "[lengths]", f"# {fit.params['lengths.output'].evidence}", "output = ["]
        for w, lo, hi in fit.output_lengths:
            comp = f"value = {lo}" if lo == hi else f'dist = "uniform", low = {lo}, high = {hi}'
            if lo == hi:
                comp = f'dist = "const", {comp}'
            lines.append(f"  {{ weight = {w:g}, {comp} }},")
        lines.append("]")
    lines += ["", "[twin]", f"run = {_toml(run)}"]
    if fit.workloads:
        lines.append(f"workloads = [{', '.join(_toml(w) for w in fit.workloads)}]")
    if fit.running_reached is not None:
        lines.append(f"running_reached = {_toml(fit.running_reached)}")
    for p in fit.params.values():
        lines += ["", f'[twin.params."{p.name}"]']
        if p.value is not None:
            lines.append(f"value = {_toml(p.value)}")
        lines += [
            f"status = {_toml(p.status)}",
            f"evidence = {_toml(p.evidence)}",
            f"quality = {_toml(p.quality)}",
        ]
    return "\n".join(lines) + "\n"


def write_twin(path: Path, fit: TwinFit, run: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(twin_toml(fit, path.stem, run), encoding="utf-8")


def read_twin(path: Path) -> Twin:
    """A twin profile written by `write_twin`. UsageError on a missing or foreign file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"twin profile {str(path)!r}: cannot read: {e}") from None
    twin = data.pop("twin", None)
    if not isinstance(twin, dict) or not isinstance(twin.get("params"), dict):
        raise UsageError(
            f"{path}: not a twin profile (no [twin] table; write one with swarm twin fit RUN_DIR)"
        )
    params = {
        name: Param(name, p.get("value"), p["status"], p.get("evidence", ""), p.get("quality", ""))
        for name, p in twin["params"].items()
    }
    profile = parse_profile(data, path.stem)
    gap = params.get("client.gap_s")
    gap_s = None if gap is None or gap.value is None else float(gap.value)
    prompt = params.get("lengths.prompt_tokens")
    return Twin(
        profile,
        params,
        twin.get("running_reached"),
        str(twin.get("run", "")),
        gap_s,
        None if prompt is None or prompt.value is None else float(prompt.value),
        tuple(str(w) for w in twin.get("workloads") or ()),
    )
