"""The lines of swarm/ that some test files cover, the processes they start included (docs/testing.md).

    .venv/bin/python scripts/test_coverage.py tests/integration/test_bad_input.py --json after.json
    .venv/bin/python scripts/test_coverage.py --compare before.json after.json

The first form runs pytest on the files under coverage.py, with every Python process the tests start
measured too (coverage's own start-up hook, COVERAGE_PROCESS_START; gevent and threads both traced,
as the Locust processes need), combines the data and prints the statements covered; --json keeps the
covered lines per file. The second lists the lines the first file covers and the second does not:
"no line lost" is an empty list. A rewritten or merged test file is held to this: run the first form
at the commit before the change (a `git worktree`) and after it, then compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measure(tests: list[str], keep: Path | None) -> dict[str, list[int]]:
    with tempfile.TemporaryDirectory(prefix="swarm-cov-") as tmp:
        rc = Path(tmp) / "coveragerc"
        rc.write_text(
            "[run]\n"
            "parallel = true\n"
            f"source = {REPO / 'swarm'}\n"
            f"data_file = {Path(tmp) / '.coverage'}\n"
            "concurrency = gevent,thread\n"
            "sigterm = true\n"
        )
        env = {**os.environ, "COVERAGE_PROCESS_START": str(rc)}
        cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q",
               "-p", "no:cacheprovider", "-p", "no:xdist", *tests]  # fmt: skip
        tests_rc = subprocess.run(cmd, cwd=REPO, env=env).returncode
        if tests_rc != 0:
            print(f"pytest exit {tests_rc}: the figures below are of a failing run", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=REPO, check=True
        )
        report = Path(tmp) / "cov.json"
        subprocess.run([sys.executable, "-m", "coverage", "json", f"--rcfile={rc}", "-q", "-o", str(report)],
                       cwd=REPO, check=True)  # fmt: skip
        data = json.loads(report.read_text())
    lines = {
        str(Path(name).resolve().relative_to(REPO)): sorted(f["executed_lines"])
        for name, f in data["files"].items()
        if f["executed_lines"]
    }
    total = data["totals"]
    print(
        f"swarm/ statements covered: {total['covered_lines']} of {total['num_statements']} ({', '.join(tests)})"
    )
    if keep:
        keep.write_text(json.dumps(lines, indent=0, sort_keys=True))
    return lines


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    lost = {f: sorted(set(ls) - set(b.get(f, []))) for f, ls in a.items()}
    lost = {f: ls for f, ls in lost.items() if ls}
    gained = sum(len(set(ls) - set(a.get(f, []))) for f, ls in b.items())
    n_a, n_b = sum(map(len, a.values())), sum(map(len, b.values()))
    print(f"covered before {n_a}, after {n_b}; {gained} lines gained, {sum(map(len, lost.values()))} lost")
    for f, ls in sorted(lost.items()):
        print(f"  lost {f}: {ls}")
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests", nargs="*", help="test files or node ids")
    ap.add_argument("--json", type=Path, help="write the covered lines per file here")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.tests:
        ap.error("give test files, or --compare BEFORE AFTER")
    measure(args.tests, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
