"""`swarm` command line: a thin dispatcher over one module per sub-command.

Each command module exposes `configure(parser)` and `main(args) -> int` and imports its heavy
dependencies inside `main`, so `swarm sim` never imports Locust/gevent (which monkey-patches).
Bad input raises `UsageError` (or argparse errors): one line on stderr, exit 2, no traceback
(swarm/core/errors.py `exit_code`, `one_line`: the one mapping for every command).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from swarm.core.errors import SwarmError, exit_code, one_line

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "sim": (
        "swarm.sim.cli",
        "run the simulated LLM server: a vLLM (default) or llama.cpp face, streaming and /metrics",
    ),
    "run": (
        "swarm.orchestrate.run",
        "distributed run on this machine: (simulator,) Locust master and N workers",
    ),
    "tune": (
        "swarm.tune.command",
        "search a server's configurations (a grid, a list, or guided by the diagnosis): one swarm run each",
    ),
    "twin": (
        "swarm.tune.twin.command",
        "a digital twin of a server: fit the simulator to a measured run, predict configurations",
    ),
    "report": (
        "swarm.analysis.report",
        "render DIR/report.html (plots, stage table, diagnosis) from a run's files",
    ),
    "compare": (
        "swarm.analysis.compare",
        "stage-by-stage deltas of two runs (table + HTML), e.g. before/after a tuning",
    ),
    "demo": (
        "swarm.orchestrate.demo",
        "the README's demo: master + 2 workers against the embedded simulated vLLM",
    ),
    "dashboards": (
        "swarm.grafana.cli",
        "build the Grafana dashboards (dashboards as code) into checked-in JSON",
    ),
    "grafana": (
        "swarm.grafana.api",
        "Grafana API: push the datasource and dashboards to an existing Grafana",
    ),
    "target": (
        "swarm.orchestrate.targets",
        "start a real server on 127.0.0.1 to try the swarm on: vLLM (CPU build) or llama.cpp, tiny model",
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swarm", description="Load-testing swarm for OpenAI-compatible LLM servers")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(importlib.import_module(args._module).main(args) or 0)
    except (SwarmError, KeyboardInterrupt) as e:
        print(one_line(f"swarm {args.command}", e), file=sys.stderr)
        return exit_code(e)
