"""scripts/gpu-check.sh's one-page summary (OUT/summary.md) and the tune's table (OUT/tune-table.txt).

    python scripts/gpu_check_summary.py WORK OUT --mode gpu --slo "ttft_p99<=500ms" --params 1.5B \
        --np-base 4 --np-grid 2,8 --sweep 4,16,32

Reads what the check's steps left in WORK: steps.tsv (step, seconds, exit code), gpu.txt,
build-seconds.txt, model.txt, the search's run directory (search/summary.json), the tune's tune.json,
twin.toml and the twin's predictions (twin/tune.json). The twin is also asked, as
tests/e2e/test_twin_real.py asks it, for the QPS at each -np's top sweep stage, beside what the tune
measured there. A step that did not run, or left nothing, is said as that: the summary is written
whichever step failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from swarm.tune.results import (  # noqa: E402  (the repository on the path first: a script, not the package)
    ConfigResult,
    TuneResult,
    answer_text,
    prediction_error,
    read_tune_json,
    table_text,
)

STEPS = ("wheels", "build", "model", "search", "tune", "twin")
WORKLOAD = "short_qa"  # scripts/gpu-check.sh's


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    rc: int


def read_steps(path: Path) -> dict[str, Step]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            name, seconds, rc = line.split("\t")
            out[name] = Step(name, float(seconds), int(rc))
    return out


def first_line(path: Path) -> str | None:
    if not path.exists():
        return None
    lines = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
    return lines[0] if lines else None


def steps_section(steps: dict[str, Step]) -> list[str]:
    lines = ["| step | seconds | result |", "|---|---|---|"]
    for name in STEPS:
        s = steps.get(name)
        if s is None:
            lines.append(f"| {name} | - | not run |")
        else:
            lines.append(f"| {name} | {s.seconds:.1f} | {'ok' if s.rc == 0 else f'failed (exit {s.rc})'} |")
    total = sum(s.seconds for s in steps.values())
    lines.append(f"\nAll steps: {total:.0f} s ({total / 60:.1f} min).")
    return lines


def search_section(run_dir: Path) -> list[str]:
    path = run_dir / "summary.json"
    if not path.exists():
        return ["No search result (search/summary.json is missing)."]
    search = json.loads(path.read_text()).get("search") or {}
    if not search:
        return ["The search's summary.json holds no `search` block."]
    lines = [
        f"- {search.get('headline') or 'no headline'}",
        f"- status: {search.get('status')}, converged: {search.get('converged')}, "
        f"{len(search.get('probes') or [])} probes in {search.get('duration_s')} s",
    ]
    if search.get("qps") is not None:
        ttft = search.get("ttft_p99_s")
        lines.append(
            f"- at the answer: QPS {search['qps']:.2f}, TTFT p99 "
            + ("-" if ttft is None else f"{1000 * ttft:.0f} ms")
        )
    if search.get("why"):
        lines.append(f"- why ({search.get('why_kind')}): {search['why']}")
    return lines


def tune_rows(result: TuneResult) -> list[str]:
    return [
        f"- {c.name}: {c.status}, answer {answer_text(c)}"
        + (f", bottleneck {c.bottleneck}" if c.bottleneck else "")
        for c in result.configs
    ]


def f16_config(result: TuneResult, np: str) -> ConfigResult | None:
    """The tune's configuration at -np NP with an f16 KV cache (the twin maps no cache type)."""
    for c in result.configs:
        cache = (c.flags.get("--cache-type-k", "f16"), c.flags.get("--cache-type-v", "f16"))
        if c.flags.get("-np") == np and cache == ("f16", "f16"):
            return c
    return None


def top_stage(run_dir: Path) -> tuple[int, float] | None:
    """(users, QPS) of a sweep run's highest stage."""
    path = run_dir / "summary.json"
    if not path.exists():
        return None
    stages = [x for x in json.loads(path.read_text()).get("stages") or [] if x.get("users")]
    if not stages:
        return None
    top = max(stages, key=lambda x: x["users"])
    return int(top["users"]), float(top["total"]["qps"])


def twin_section(
    work: Path, tune: TuneResult | None, np_grid: list[str], workload: str, assume: list[str]
) -> list[str]:
    from swarm.core.errors import UsageError
    from swarm.load.workloads import workload_draw
    from swarm.tune.twin.predict import configure_profile, level_result, parse_assumptions
    from swarm.tune.twin.profile import read_twin

    if not (work / "twin.toml").exists():
        return ["No twin (swarm twin fit wrote no twin.toml)."]
    if tune is None:
        return ["A twin, but no tune to set it beside."]
    twin = read_twin(work / "twin.toml")
    predicted_path = work / "twin" / "tune.json"
    predicted = read_tune_json(predicted_path) if predicted_path.exists() else None
    fitted = max(np_grid, key=int)
    lines = [
        "| -np | twin's answer (search) | tune's answer (sweep) | users | twin's QPS | measured QPS | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for np in sorted(np_grid, key=int):
        real = f16_config(tune, np)
        guess = next((c for c in predicted.configs if c.flags.get("-np") == np), None) if predicted else None
        guess_text = "-" if guess is None else (answer_text(guess) if guess.status == "ok" else guess.status)
        top = top_stage(Path(real.run_dir)) if real and real.run_dir else None
        if top is None:
            lines.append(f"| {np} | {guess_text} | - | - | - | - | - |")
            continue
        users, measured = top
        try:
            profile = configure_profile(twin, {"-np": np}, parse_assumptions(assume))
        except UsageError as e:
            lines.append(
                f"| {np} | {guess_text} | {answer_text(real)} | {users} | not predicted: {e} | "
                f"{measured:.2f} | - |"
            )
            continue
        qps = level_result(twin, profile, users, workload_draw(workload)).qps
        error = prediction_error(qps, measured)
        lines.append(
            f"| {np}{' (fitted)' if np == fitted else ''} | {guess_text} | {answer_text(real)} | {users} | "
            f"{qps:.2f} | {measured:.2f} | " + ("-" if error is None else f"{100 * error:+.0f}%") + " |"
        )
    return lines


def summary(work: Path, args: argparse.Namespace) -> tuple[str, str | None]:
    steps = read_steps(work / "steps.tsv")
    tune_path = work / "tune" / "tune.json"
    tune = read_tune_json(tune_path) if tune_path.exists() else None
    what = "GPU" if args.mode == "gpu" else "CPU dry run (GPU_CHECK_CPU=1: the CPU build, no CUDA)"
    head = [
        f"# GPU check: seed 004's llama.cpp story ({what})",
        "",
        f"- commit: {first_line(work / 'commit.txt') or 'unknown'}",
        f"- machine: {first_line(work / 'gpu.txt') or 'no GPU named (nvidia-smi not run)'}",
        f"- llama-server: {first_line(work / 'llama-server-version.txt') or 'not built'}"
        + (f"; its build took {b} s" if (b := first_line(work / "build-seconds.txt")) else ""),
        f"- model: {first_line(work / 'model.txt') or f'not written (--params {args.params})'}",
        f"- SLO: `{args.slo}`; the search at -np {args.np_base}; the tune over -np {args.np_grid} x -ctk/-ctv, "
        f"each a sweep of {args.sweep} users",
        "",
        "## Steps",
        "",
        *steps_section(steps),
        "",
        f"## Search (-np {args.np_base})",
        "",
        *search_section(work / "search"),
        "",
        "## Tune",
        "",
        *(tune_rows(tune) if tune else ["No tune result (tune/tune.json is missing)."]),
        *([f"\nBest for the SLO: {tune.best}."] if tune and tune.best else []),
        "",
        f"## Twin (fitted on the tune's run at -np {max(args.np_grid.split(','), key=int)}, f16 cache)",
        "",
        *twin_section(work, tune, args.np_grid.split(","), WORKLOAD, args.assume),
        *([f"\nAssumed (llama.cpp shows no KV usage): {', '.join(args.assume)}."] if args.assume else []),
        "",
        "Run directories, tune.json/tune.html of the tune and the twin, server logs: runs.tar.gz.",
    ]
    return "\n".join(head) + "\n", (table_text(tune) + "\n") if tune else None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    ap.add_argument("--slo", required=True)
    ap.add_argument("--params", required=True)
    ap.add_argument("--np-base", required=True)
    ap.add_argument("--np-grid", required=True)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--assume", action="append", default=[], help="as swarm twin predict --assume")
    args = ap.parse_args(argv)
    text, table = summary(args.work, args)
    (args.out / "summary.md").write_text(text)
    if table is not None:
        (args.out / "tune-table.txt").write_text(table)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
