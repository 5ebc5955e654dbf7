"""One configuration measured by `swarm tune`: its server started (tune_server.py), its prefix cache
emptied, a `swarm run` subprocess against it (so the whole stop path of swarm run applies), the
server stopped, and the configuration recorded (swarm/tune/results.py's ConfigResult).

swarm run's exit code decides the record: 0, or 1 (an SLO not met, a search that found no load
meeting it) is a measured configuration; 2 (bad input) ends the tune with swarm run's line; 130
(interrupted) is an interrupt of the tune; anything else is a failed configuration with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swarm.core.errors import UsageError
from swarm.core.prefix_cache import reset_prefix_cache
from swarm.orchestrate.processes import die_with_parent, free_port, sigterm_as_interrupt
from swarm.stats.provenance import masked_command
from swarm.tune import server as tune_server
from swarm.tune.plan import LOOPBACK, Flags, config_name, dir_name, serve_command
from swarm.tune.results import ConfigResult, config_from_run

if TYPE_CHECKING:
    from swarm.orchestrate.virtual_run import VirtualLoad

VIRTUAL_PORT = 0  # the --port a --virtual configuration's command shows: nothing listens
RUN_STOP_S = 120.0  # for an interrupted swarm run to stop its load and write what it has
MEASURED = (0, 1)  # swarm run's exit codes of a measured configuration (1: an SLO not met)


@dataclass(frozen=True)
class TuneContext:
    """What every configuration's measurement shares."""

    serve_cmd: list[str]
    run_argv: list[str]  # the swarm run options handed on
    out: Path
    health_timeout_s: float
    gpus: int
    gpu_hourly_cost: float | None
    virtual: VirtualLoad | None = None  # --virtual: each configuration's `swarm sim` on the virtual clock


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) while a configuration was measured; `result` is its record."""

    def __init__(self, result: ConfigResult) -> None:
        super().__init__(result.name)
        self.result = result


def measure(ctx: TuneContext, flags: Flags) -> ConfigResult:
    """Start, measure, stop one configuration. UsageError when swarm run refused its options;
    Interrupted on Ctrl-C, after the run and the server have stopped."""
    if ctx.virtual is not None:
        return measure_virtual(ctx, ctx.virtual, flags)
    name = config_name(flags)
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    cmd = serve_command(ctx.serve_cmd, flags, port)
    if "--host" in cmd and cmd[cmd.index("--host") + 1] not in (LOOPBACK, "localhost", "0.0.0.0"):
        url = f"http://{cmd[cmd.index('--host') + 1]}:{port}"
    run_dir = ctx.out / "configs" / dir_name(name)
    record = ConfigResult(name=name, flags=dict(flags), command=cmd, status="failed", run_dir=str(run_dir))
    print(f"swarm tune: {name}: starting {' '.join(cmd)}", flush=True)
    try:
        server = tune_server.start(
            cmd, url, ctx.out / "servers" / f"{dir_name(name)}.log", ctx.health_timeout_s
        )
    except tune_server.ServerFailed as e:
        record.reason, record.log_tail = e.reason, e.log_tail
        return record
    except KeyboardInterrupt:
        record.status, record.reason = "interrupted", "interrupted while the server started"
        raise Interrupted(record) from None
    try:
        reset_prefix_cache(url)  # (no key: the configuration's swarm run applies the key's origin rule)
        code, last_err = _swarm_run(ctx, url, run_dir, cmd)
    except KeyboardInterrupt:
        record.status, record.reason = "interrupted", "interrupted during its run"
        raise Interrupted(record) from None
    finally:
        died = not server.running()
        server.stop()
        record.note = server.followed()
    result = _recorded(ctx, record, code, last_err, died, server)
    result.note = record.note
    return result


def measure_virtual(ctx: TuneContext, load: VirtualLoad, flags: Flags) -> ConfigResult:
    """--virtual: the configuration's `swarm sim` command stepped on the virtual clock
    (swarm/orchestrate/virtual_run.py) under the run options' sweep, workload and SLO, its run
    directory written as swarm run would and recorded as a measured one is; nothing is started. A
    flag the simulator refuses fails the configuration, as the real server would not start."""
    from swarm.orchestrate.virtual_run import (
        VirtualSweep,
        sim_args_of,
        sim_command_profile,
        workload,
        write_sweep,
    )

    name = config_name(flags)
    cmd = serve_command(ctx.serve_cmd, flags, VIRTUAL_PORT)
    run_dir = ctx.out / "configs" / dir_name(name)
    record = ConfigResult(name=name, flags=dict(flags), command=cmd, status="failed", run_dir=str(run_dir))
    print(f"swarm tune: {name}: on the virtual clock: {' '.join(cmd)}", flush=True)
    try:
        profile = sim_command_profile(sim_args_of(cmd) or [])
    except UsageError as e:
        record.reason = f"the simulator refused its flags: {e}"
        return record
    request = workload(profile, load.workload)
    write_sweep(
        run_dir,
        profile,
        VirtualSweep(load.users, load.stage_s, load.warmup_s, request, name=load.workload),
        load.slo,
    )
    return config_from_run(
        name, record.flags, cmd, run_dir, gpus=ctx.gpus, gpu_hourly_cost=ctx.gpu_hourly_cost
    )


def _recorded(
    ctx: TuneContext, record: ConfigResult, code: int, last_err: str, died: bool, server: tune_server.Server
) -> ConfigResult:
    """The configuration's record from swarm run's exit code and its run directory."""
    if code == 2:
        raise UsageError(f"swarm run refused: {last_err or 'exit 2'}")
    if code == 130:
        record.status, record.reason = "interrupted", "its swarm run was interrupted"
        raise Interrupted(record)
    if code not in MEASURED:
        record.reason = f"swarm run exit {code}" + (f": {last_err}" if last_err else "")
        record.log_tail = server.tail() if died else None
        return record
    try:
        return config_from_run(
            record.name,
            record.flags,
            record.command,
            Path(record.run_dir or ""),
            gpus=ctx.gpus,
            gpu_hourly_cost=ctx.gpu_hourly_cost,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        record.reason = f"its run directory could not be read: {e}"
        return record


def run_command(ctx: TuneContext, url: str, run_dir: Path, server_cmd: Sequence[str] = ()) -> list[str]:
    """The configuration's swarm run: at `url`, into `run_dir`, with the run options handed on (an
    --api-key among them goes by the environment instead: `run_env`); `server_cmd`, the server's
    command as started, goes to the run's provenance (`--target-command`, secret flags masked)."""
    overwrite = ["--overwrite"] if run_dir.exists() else []  # --resume re-measures an unfinished one
    # last, so a --target-command handed on does not stand for this configuration's
    command = ["--target-command", masked_command(shlex.join(server_cmd), ())] if server_cmd else []
    return [
        sys.executable,
        "-m",
        "swarm",
        "run",
        "--host",
        url,
        "--out",
        str(run_dir),
        *overwrite,
        *key_apart(ctx.run_argv)[0],
        *command,
    ]


def run_env(ctx: TuneContext) -> dict[str, str]:
    """swarm run's environment: the tune's, with an --api-key given to the tune as $OPENAI_API_KEY
    (a command line is every local user's to read). swarm run sends it by its own rule only
    (swarm/core/apikey.py): to the server at its --host, or to the --api-key-origin handed on."""
    key = key_apart(ctx.run_argv)[1]
    return {**os.environ, "PYTHONUNBUFFERED": "1", **({"OPENAI_API_KEY": key} if key else {})}


def key_apart(run_argv: list[str]) -> tuple[list[str], str | None]:
    """The run options without --api-key (tune's argument parser keeps each as `--api-key VALUE`),
    and its last value."""
    rest, key = [], None
    pairs = iter(run_argv)
    for arg in pairs:
        if arg == "--api-key":
            key = next(pairs, None)
        else:
            rest.append(arg)
    return rest, key


def _swarm_run(ctx: TuneContext, url: str, run_dir: Path, server_cmd: Sequence[str]) -> tuple[int, str]:
    """swarm run against the server, its output on the console; (exit code, its last stderr line).
    On Ctrl-C it stops as swarm run does (it got the terminal's SIGINT too; a SIGTERM to the tune
    is handed on) and KeyboardInterrupt is raised once it has gone."""
    popen = subprocess.Popen(
        run_command(ctx, url, run_dir, server_cmd),
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=run_env(ctx),
        preexec_fn=die_with_parent(),
    )
    last: deque[str] = deque(maxlen=1)
    echo = threading.Thread(target=_echo, args=(popen, last), daemon=True)
    echo.start()
    _children.add(popen)
    try:
        code = popen.wait()
    except KeyboardInterrupt:
        try:
            popen.wait(timeout=RUN_STOP_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=10)
        raise
    finally:
        _children.discard(popen)
    echo.join(timeout=5)
    return code, (last[0].strip() if last else "")


_children: set[subprocess.Popen] = set()  # the swarm run now going, for a SIGTERM to hand on


def sigterm_handed_on() -> contextlib.AbstractContextManager[None]:
    """SIGTERM to the tune: handed on to the swarm run now going (which stops as on Ctrl-C), then
    raised here as KeyboardInterrupt. (A terminal's Ctrl-C reaches that run by itself.)"""
    return sigterm_as_interrupt(first=_hand_on_sigterm)


def _hand_on_sigterm() -> None:
    for child in list(_children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)


def _echo(popen: subprocess.Popen, last: deque[str]) -> None:
    assert popen.stderr is not None
    for line in popen.stderr:
        sys.stderr.write(line)
        if line.strip():
            last.append(line)
