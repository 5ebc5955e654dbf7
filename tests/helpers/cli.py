"""Run the `swarm` command line in the test's own process: `run_cli("sim", "--port", "70000")`.

For tests of what a command refuses up front (one line, exit 2): starting `python -m swarm` for
each costs a second or two of imports, calling `swarm.cli.main` costs milliseconds. What is not the
same as a process of its own, so kept as a subprocess where it matters:
  - an exception that escapes `main` propagates out of `run_cli` and fails the test with its
    traceback (a subprocess would print "Traceback" and exit 1): so "no exception escapes main"
    is what "no traceback in the output" means here;
  - only the refusal paths belong here: a command that gets as far as starting its work does it in
    the test's process (`swarm sim` would serve until the test's timeout), and a command that
    imports Locust (gevent monkey-patches the standard library on import) must never run here
    (swarm/cli.py imports each command's heavy dependencies inside its `main`);
  - the working directory and environment are the test's own, not the subprocess's `cwd=REPO`.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

from swarm import cli


@dataclass(frozen=True)
class CliResult:
    """What `subprocess.run(..., capture_output=True, text=True)` returns, as far as tests read it."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_cli(*argv: str) -> CliResult:
    """`swarm ARGV...` in-process: its exit code (argparse's SystemExit included) and its stdout and
    stderr. Nothing but SystemExit is caught: any other exception reaches the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as e:  # argparse: -h (0) and bad options (2)
            code = _exit_status(e.code)
    return CliResult(list(argv), code, out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    """The status a process would exit with for SystemExit(code): None is 0, an int itself, anything
    else (a message) is printed to stderr and is 1, as the interpreter does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
