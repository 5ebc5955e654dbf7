"""`swarm run`'s view of the option table (core/options.py): the sections of its --help, which
options it reads itself and which it only hands on to its Locust processes as given (before `--`
as after it)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from swarm.core.options import OPTIONS, Option

RUN_GROUPS: dict[str, str] = {
    "target": "target: the server under test",
    "load": "load: how many users, for how long, which stages",
    "workload": "workload: what each request is",
    "search/SLO": "search/SLO: objectives, goodput, the search for the load the server takes",
    "outputs": "outputs: where the run's files go",
    "observability": "observability: metrics polled and served during the run",
}
"""`swarm run --help`'s sections, in order (argparse argument groups)."""
_RUN_GROUP_OF_TABLE_GROUP = {"workload": "workload", "stages": "load", "statistics": "search/SLO"}
_RUN_GROUP_EXCEPTIONS = {
    "--search": "search/SLO",
    "--search-precision": "search/SLO",
    "--search-budget": "search/SLO",
    "--min-stage-time": "search/SLO",
    "--goodput-min": "search/SLO",
    "--saturation-guard": "search/SLO",
    "--prometheus-port": "observability",
    "--prometheus-host": "observability",
    "--server-family": "observability",
    "--run-id": "outputs",
    "--target-command": "outputs",
}
RUN_SETS_ITSELF = ("--swarm-out", "--summary-part")
"""Table options `swarm run` gives its Locust processes itself (from --out; the master's summary as
the part it completes into summary.json): not among its own."""


def run_group(opt: Option) -> str:
    """The section of `swarm run --help` that lists `opt`."""
    return _RUN_GROUP_EXCEPTIONS.get(opt.flag, _RUN_GROUP_OF_TABLE_GROUP[opt.group])


def passed_on(opt: Option) -> bool:
    """An option `swarm run` accepts only to hand it on to its Locust processes as given (it reads
    nothing of it itself): the table's options not marked `run=True`. Given before `--` or after
    it, the same."""
    return not opt.run and opt.flag not in RUN_SETS_ITSELF


def add_run_options(
    groups: dict[str, argparse._ArgumentGroup] | argparse.ArgumentParser, workloads: Iterable[str]
) -> None:
    """Add the table's options to `swarm run`'s parser, each in its section (`groups`: RUN_GROUPS
    name -> argument group, or one parser for all). Those marked `run=True` swarm run reads itself;
    the others (`passed_on`) default to absent (argparse.SUPPRESS), so those given are exactly the
    ones handed on (`passed_on_args`)."""
    names = list(workloads)
    for opt in OPTIONS:
        if opt.flag in RUN_SETS_ITSELF:
            continue
        target = groups if isinstance(groups, argparse.ArgumentParser) else groups[run_group(opt)]
        kw = opt.argparse_kwargs(names, for_run=True)
        if passed_on(opt):
            kw["default"] = argparse.SUPPRESS
        target.add_argument(opt.flag, **kw)


def passed_on_args(args: argparse.Namespace) -> list[str]:
    """The passed-on options given to `swarm run` (before `--`), as Locust command-line arguments."""
    out: list[str] = []
    for opt in OPTIONS:
        if not passed_on(opt) or not hasattr(args, opt.dest):
            continue
        value = getattr(args, opt.dest)
        if opt.flag_action:
            out += [opt.flag] if value else []
        else:
            out += [opt.flag, str(value)]
    return out
