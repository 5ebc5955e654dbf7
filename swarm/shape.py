"""Step-load stages (closed-loop concurrency sweep) as a Locust `LoadTestShape`.

`--sweep 10,30,64 --stage-time 30s [--warmup 5s]` runs each concurrency level for the stage
time. The master (or local runner) owns the clock; on each stage change it sets
`environment.swarm_stage` and broadcasts a `swarm_stage` message so every worker tags the
records it sends with the stage index (`RequestRecord.stage`) and flags the first `--warmup`
seconds of each stage (`RequestRecord.warmup`, excluded from that stage's statistics).
The stage timeline lands in `environment.swarm_stages` for the summary.

Without `--sweep` the shape behaves like Locust's plain -u/-r/-t run (one stage, index 0), so
every swarm locustfile can carry it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import gevent
from locust import LoadTestShape, events
from locust.runners import MasterRunner, WorkerRunner

from swarm.errors import UsageError

STAGE_MESSAGE = "swarm_stage"


@dataclass
class Stage:
    index: int
    users: int
    start_wall_s: float
    end_wall_s: float | None = None
    warmup_s: float = 0.0


def parse_sweep(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --sweep {text!r}: give user counts, e.g. 10,30,64,128") from None
    if not levels or any(n < 1 for n in levels):
        raise UsageError(f"bad --sweep {text!r}: every level must be a whole number >= 1, e.g. 10,30,64")
    return levels


def parse_seconds(text: str, option: str) -> float:
    from swarm.run import parse_timespan  # Locust's time format

    try:
        return float(parse_timespan(str(text)))
    except UsageError as e:
        raise UsageError(f"{option}: {e}") from None


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    parser.add_argument("--sweep", default="", include_in_web_ui=True,
                       help="closed-loop concurrency stages, e.g. 10,30,64,128,200,256")
    parser.add_argument("--stage-time", default="30s", include_in_web_ui=True, help="duration of each stage (default 30s)")
    parser.add_argument("--warmup", default="0s", include_in_web_ui=True,
                       help="seconds at the start of each stage whose requests are excluded from its statistics")


def _set_stage(environment: Any, index: int, warmup_s: float) -> None:
    """Worker/local side: tag requests from now on; clear the warm-up flag after warmup_s."""
    environment.swarm_stage = index
    environment.swarm_warmup = warmup_s > 0
    if warmup_s > 0:
        def clear() -> None:
            if getattr(environment, "swarm_stage", None) == index:
                environment.swarm_warmup = False

        gevent.spawn_later(warmup_s, clear)


@events.init.add_listener
def _on_init(environment: Any, **_kwargs: Any) -> None:
    environment.swarm_stage = 0
    environment.swarm_warmup = False
    environment.swarm_stages = []
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message(
            STAGE_MESSAGE, lambda msg, **_: _set_stage(environment, msg.data["index"], msg.data["warmup_s"]))


class SwarmShape(LoadTestShape):
    """Stages from --sweep; otherwise Locust's -u/-r/-t."""

    use_common_options = True

    def __init__(self) -> None:
        super().__init__()
        self._current: int | None = None

    def _options(self) -> tuple[list[int], float, float]:
        opts = self.runner.environment.parsed_options
        if not getattr(opts, "sweep", ""):
            return [], 0.0, 0.0
        return (parse_sweep(opts.sweep), parse_seconds(opts.stage_time, "--stage-time"),
                parse_seconds(opts.warmup, "--warmup"))

    def reset_time(self) -> None:
        super().reset_time()
        self._current = None

    def _enter(self, index: int, users: int, warmup_s: float) -> None:
        env = self.runner.environment
        now = time.time()
        if env.swarm_stages:
            env.swarm_stages[-1].end_wall_s = now
        env.swarm_stages.append(Stage(index, users, now, None, warmup_s))
        self._current = index
        _set_stage(env, index, warmup_s)
        if isinstance(self.runner, MasterRunner):
            self.runner.send_message(STAGE_MESSAGE, {"index": index, "warmup_s": warmup_s, "users": users})

    def _close(self) -> None:
        stages = self.runner.environment.swarm_stages
        if stages and stages[-1].end_wall_s is None:
            stages[-1].end_wall_s = time.time()

    def tick(self) -> tuple[int, float] | None:
        levels, stage_s, warmup_s = self._options()
        t = self.get_run_time()
        opts = self.runner.environment.parsed_options
        if not levels:  # plain run: one stage at -u users
            users = int(opts.num_users or 1)
            if self._current is None:
                self._enter(0, users, 0.0)
            if opts.run_time and t >= opts.run_time:
                self._close()
                return None
            return users, float(opts.spawn_rate or users)
        if stage_s <= 0:
            raise UsageError("--stage-time must be > 0, e.g. 30s")
        index = int(t // stage_s)
        if index >= len(levels):
            self._close()
            return None
        if index != self._current:
            self._enter(index, levels[index], warmup_s)
        users = levels[index]
        return users, float(max(users, opts.spawn_rate or 0))


def stage_timeline(environment: Any) -> list[dict[str, Any]]:
    """The stages run so far, as plain dicts (for summary.json)."""
    return [asdict(s) for s in getattr(environment, "swarm_stages", [])]
