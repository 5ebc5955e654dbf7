"""What a structural change must leave byte for byte the same (issue 37), written into one folder.

For the run directories given (copied first; and tests/helpers/data/sim_sweep_run, recorded):
`swarm report` (report.html, stages.csv, diagnosis.json, the PNGs); the diagnosis matrix's engine
causes on the virtual clock (benchmarks/diagnosis_matrix.py --virtual: each run directory, reported);
`swarm tune --virtual` from seed 000's round 1 (tune.json, tune.html, each configuration's run
directory); `swarm twin fit` of the first run directory given and `swarm twin predict` on it; and
the Locust argv `swarm run` builds for a plain, a host, a sweep, a rate, a search and a tune run.

Run it once at each revision, into the same OUT path (the outputs name their own folder), and
compare:

    git worktree add /tmp/before REV
    PYTHONPATH=/tmp/before .venv/bin/python /tmp/before/scripts/structure_outputs.py /tmp/so RUN...
    mv /tmp/so /tmp/so-before
    .venv/bin/python scripts/structure_outputs.py /tmp/so RUN... && diff -r /tmp/so-before /tmp/so

(a revision older than this script: run this file with PYTHONPATH pointing at that revision).
Only the CLI and `swarm.orchestrate`'s plan and command builders are used, which both sides have.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "tests" / "helpers" / "data" / "sim_sweep_run"
ROUND_1 = (
    "{py} -m swarm sim --profile rtx5090x4-qwen3.6-27b --max-num-seqs 64 --max-model-len 65536 "
    "--gpu-memory-utilization 0.90"
)
RUN = ["--stage-time", "8s", "--workload", "short_qa", "--slo", "ttft_p99<=800ms", "--workers", "1"]
# swarm run's options for each kind of run whose Locust argv is compared
ARGV_CASES = {
    "plain": ["-u", "8", "-t", "20s"],
    "host": ["--host", "http://127.0.0.1:9", "-u", "4", "-t", "10s", "--workload", "chat"],
    "sweep": ["--sweep", "4,8,16", "--stage-time", "10s", "--warmup", "2s", "--slo", "ttft_p99<=500ms"],
    "rate": ["--rate", "2,4", "-u", "40", "--stage-time", "5s", "--arrivals", "constant"],
    "search": ["--search", "concurrency", "--slo", "ttft_p99<=800ms", "--search-budget", "5m"],
    "tune": ["--host", "http://127.0.0.1:9", *RUN, "--sweep", "48,96,160"],
}


def swarm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "swarm", *args], capture_output=True, text=True, cwd=cwd)
    if p.returncode not in (0, 1):  # 1: an SLO failed, still written
        raise SystemExit(f"swarm {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p


def reports(out: Path, runs: list[Path]) -> None:
    for run in [RECORDED, *runs]:
        dest = out / "runs" / run.name
        shutil.copytree(
            run, dest, ignore=shutil.ignore_patterns("report.html", "stages.csv", "diagnosis.json", "*.png")
        )
        swarm("report", str(dest))


def matrix(out: Path) -> None:
    harness = REPO / "benchmarks" / "diagnosis_matrix.py"
    cmd = [sys.executable, str(harness), "--virtual", "--only", "none,kv,seq_cap,compute"]
    p = subprocess.run([*cmd, "--out", str(out / "matrix")], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"diagnosis matrix: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    for run in sorted((out / "matrix").iterdir()):
        swarm("report", str(run))


def tune_and_twin(out: Path, runs: list[Path]) -> None:
    serve = ROUND_1.format(py=sys.executable)
    grid = ["--grid", "max-num-seqs=64,256", "--sweep", "64,160", "--virtual", *RUN]
    swarm("tune", "--serve-cmd", serve, *grid, "--out", str(out / "tune-virtual"))
    for run in sorted((out / "tune-virtual" / "configs").iterdir()):
        swarm("report", str(run))
    if runs:
        profile = out / "twin.toml"
        swarm("twin", "fit", str(out / "runs" / runs[0].name), "--out", str(profile))
        predict = ["--grid", "max-num-seqs=64,128", "--search", "concurrency", "--workload", "short_qa"]
        swarm(
            "twin", "predict", str(profile), *predict, "--slo", "ttft_p99<=800ms", "--out", str(out / "twin")
        )


def argv(out: Path) -> None:
    """The master's and a worker's command line for each case (ports fixed, the run id dropped)."""
    from swarm.orchestrate import commands, plan, run

    lines = {}
    for name, opts in ARGV_CASES.items():
        parser = __import__("argparse").ArgumentParser()
        run.configure(parser)
        args = parser.parse_args(["--out", str(out / "argv" / name), *opts])
        p = plan.plan_from_args(args, run.run_options())
        host = ",".join(p.hosts) or "http://127.0.0.1:8000"
        master = commands.master_command(p, host, 5557, 9646)
        worker = commands.worker_command(p, host, 5557)
        lines[name] = {"master": _no_run_id(master, p.run_id), "worker": _no_run_id(worker, p.run_id)}
    (out / "argv.json").write_text(json.dumps(lines, indent=2) + "\n")


def _no_run_id(cmd: list[str], run_id: str) -> str:
    """The command line with what differs between two checkouts named: the run id, the Python, the
    folder the package is in (the locustfile's path)."""
    import swarm

    checkout = str(Path(swarm.__file__).resolve().parents[1])
    return (
        shlex.join(cmd)
        .replace(run_id, "RUN_ID")
        .replace(sys.executable, "PYTHON")
        .replace(checkout, "CHECKOUT")
    )


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    runs = [Path(r) for r in sys.argv[2:]]
    if out.exists():
        raise SystemExit(f"{out} exists: give a new folder")
    out.mkdir(parents=True)
    reports(out, runs)
    matrix(out)
    tune_and_twin(out, runs)
    argv(out)
    print(f"structure outputs in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
