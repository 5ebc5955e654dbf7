"""The suite's time, from what each tier of `make test` wrote (scripts/test-tiers.sh, docs/testing.md).

    python scripts/test_times.py DIR TIER [TIER ...] [--slowest 30]

DIR/<tier>.ms holds the tier's wall time in milliseconds and its pytest exit code; DIR/<tier>.xml its
JUnit report. Prints each tier's wall time, test count and outcome, the slowest tests over all tiers
(setup, call and teardown together, as JUnit counts a test case) and, last, the whole suite's count
as one line: "suite: N passed, N failed, N skipped".
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    tier: str
    nodeid: str
    seconds: float
    outcome: str  # passed, failed (failure or error) or skipped


def outcome(tc: ET.Element) -> str:
    if tc.find("failure") is not None or tc.find("error") is not None:
        return "failed"
    return "skipped" if tc.find("skipped") is not None else "passed"


def cases(tier: str, junit: Path) -> list[Case]:
    out = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        module = tc.get("classname", "").replace(".", "/")
        nodeid = f"{module}.py::{tc.get('name', '')}"
        out.append(Case(tier, nodeid, float(tc.get("time") or 0), outcome(tc)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("tiers", nargs="+")
    ap.add_argument("--slowest", type=int, default=30)
    args = ap.parse_args(argv)
    every: list[Case] = []
    print(f"{'tier':<9} {'tests':>5} {'failed':>6} {'wall':>9}  pytest exit")
    for tier in args.tiers:
        timing, junit = args.dir / f"{tier}.ms", args.dir / f"{tier}.xml"
        if not timing.exists():
            print(f"{tier:<9} did not run")
            continue
        ms, rc = (int(x) for x in timing.read_text().split())
        mine = cases(tier, junit) if junit.exists() else []
        every += mine
        failed = sum(c.outcome == "failed" for c in mine)
        print(f"{tier:<9} {len(mine):>5} {failed:>6} {ms / 60000:>5.1f} min  {rc}")
    print(f"\nthe {args.slowest} slowest tests (setup + call + teardown):")
    for c in sorted(every, key=lambda c: -c.seconds)[: args.slowest]:
        print(f"{c.seconds:8.1f}s  {c.tier:<9} {c.nodeid}")
    n = {k: sum(c.outcome == k for c in every) for k in ("passed", "failed", "skipped")}
    print(f"\nsuite: {n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
