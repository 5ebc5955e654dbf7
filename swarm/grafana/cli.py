"""`swarm dashboards build`: write the Grafana dashboards of swarm/grafana/dashboards.py as JSON.

`--check` writes nothing and exits 1 when the checked-in JSON is stale (what the test asserts).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_DIR = "dashboards/grafana/dashboards"


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    build = sub.add_parser(
        "build", help="generate dashboards/grafana/dashboards/*.json from swarm/grafana/dashboards.py"
    )
    build.add_argument("--out", default=DEFAULT_DIR, help=f"output directory (default {DEFAULT_DIR})")
    build.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files are stale")


def main(args: argparse.Namespace) -> int:
    from swarm.grafana import dashboards

    out = Path(args.out)
    if args.check:
        stale = dashboards.stale(out)
        for name in stale:
            print(f"swarm dashboards: {out / name} is stale: run `swarm dashboards build`", file=sys.stderr)
        return 1 if stale else 0
    for path in dashboards.write_all(out):
        print(f"swarm dashboards: wrote {path}")
    return 0
