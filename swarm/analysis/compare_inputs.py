"""What `swarm compare` compares: its inputs resolved to run directories, and whether their workloads
are the same (a comparison of different workloads is refused unless `--allow-different`).

Inputs: a run directory; a `swarm run --repeat N` directory (its repeat.json); a `swarm tune`
directory, which stands for every configuration's run in tune.json's order; `TUNEDIR:CONFIG`, one
configuration's run by its name in tune.json (a path that exists as given is always a path).

The workload of a run: the options that say what was sent and when (WORKLOAD_OPTIONS, as
summary.json's `provenance.options` resolved them), the workload files' SHA-256, the stage plan
(each stage's users and rate) and the workload names the records carry. What a run does not say
(an older run without provenance, a virtual run without records' names) is not compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swarm.analysis.rundir import RunData
from swarm.core.errors import UsageError
from swarm.core.runfiles import RECORDS_DIR, REPEAT_JSON, REQUESTS, SUMMARY, TUNE_JSON

# swarm run options that change what is sent or when (not where to, nor what is kept)
WORKLOAD_OPTIONS = (
    "workload",
    "input_tokens",
    "output_tokens",
    "ignore_eos",
    "thinking_ratio",
    "rag_prefix_share",
    "rag_tokens",
    "shared_prefix_tokens",
    "prefix_groups",
    "dataset",
    "dataset_columns",
    "turns",
    "think_time",
    "prompt_file",
    "cancel",
    "prefix_cache",
    "rate",
    "arrivals",
    "stage_time",
    "warmup",
    "trace_replay",
    "time_scale",
    "trace_start",
    "trace_duration",
    "search",
)


def is_run(d: Path) -> bool:
    return d.is_dir() and any((d / n).exists() for n in (SUMMARY, REQUESTS, RECORDS_DIR))


def _tune_configs(tune: Path) -> list[tuple[str, Path]]:
    """(name, run directory) of each configuration tune.json lists, in its order."""
    try:
        raw = json.loads((tune / TUNE_JSON).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{tune / TUNE_JSON} is not a readable tune.json ({e})") from None
    out = []
    for c in (raw.get("configs") if isinstance(raw, dict) else None) or []:
        if isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("run_dir"), str):
            run = Path(c["run_dir"])
            out.append((c["name"], run if run.is_absolute() or run.exists() else tune / run))
    return out


def resolve(inputs: Sequence[str]) -> list[Path]:
    """The run (or --repeat) directories `inputs` name, a tune directory expanded to its
    configurations' runs; UsageError (one line) for anything else or for fewer than two."""
    out: list[Path] = []
    for text in inputs:
        path = Path(text)
        if not path.exists() and ":" in text:  # TUNEDIR:CONFIG
            tune, _, name = text.rpartition(":")
            if not (Path(tune) / TUNE_JSON).exists():
                raise UsageError(f"{text}: {tune} is not a swarm tune directory (no {TUNE_JSON})")
            runs = dict(_tune_configs(Path(tune)))
            if name not in runs:
                raise UsageError(
                    f"{text}: no configuration {name!r} in {tune} (has: {', '.join(runs) or 'none'})"
                )
            path = runs[name]
        elif (path / TUNE_JSON).exists() and not is_run(path):
            configs = [run for _, run in _tune_configs(path) if is_run(run)]
            if not configs:
                raise UsageError(f"{path} is a swarm tune directory with no configuration's run")
            out += configs
            continue
        if not (is_run(path) or (path / REPEAT_JSON).exists()):
            raise UsageError(f"{path} is not a run directory (no summary.json, requests.parquet or records/)")
        out.append(path)
    if len(out) < 2:
        raise UsageError(f"swarm compare needs two runs or more (got {len(out)}): DIR_A DIR_B [DIR_C ...]")
    return out


def workload_of(data: RunData) -> dict[str, Any]:
    """What was sent and when, as far as the run says (see the module's docstring)."""
    out: dict[str, Any] = {}
    p = data.summary.get("provenance")
    if isinstance(p, Mapping):
        options = p.get("options") or {}
        out.update({f"--{k.replace('_', '-')}": options[k] for k in WORKLOAD_OPTIONS if k in options})
        for k, f in (p.get("files") or {}).items():
            out[f"{k} file sha256"] = f.get("sha256") if isinstance(f, Mapping) else f
    stages = data.summary.get("stages") or []
    if stages:
        out["stages (users, rate)"] = [(s.get("users"), s.get("rate")) for s in stages]
    if data.records is not None and len(data.records) and "workload" in data.records:
        out["workloads sent"] = sorted(str(w) for w in data.records["workload"].dropna().unique())
    return out


def workload_differences(a: RunData, b: RunData) -> list[str]:
    """`key A vs B` for each part of the workload both runs state and that differs."""
    wa, wb = workload_of(a), workload_of(b)
    return [f"{k} {wa[k]} vs {wb[k]}" for k in wa if k in wb and wa[k] != wb[k]]
