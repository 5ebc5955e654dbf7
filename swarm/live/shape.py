"""Step-load stages (closed-loop concurrency sweep) as a Locust `LoadTestShape`.

`--sweep 10,30,64 --stage-time 30s [--warmup 5s]` runs each concurrency level for the stage
time. The master (or local runner) owns the clock; on each stage change it sets
`environment.swarm_stage` and broadcasts a `swarm_stage` message so every worker tags the
records it sends with the stage index (`RequestRecord.stage`) and flags the first `--warmup`
seconds of each stage (`RequestRecord.warmup`, excluded from that stage's statistics).
The stage timeline lands in `environment.swarm_stages` for the summary.

Open loop: `--rate 5,10,20 [--arrivals poisson|constant]` makes each stage a request rate
instead of a user count (swarm/load/arrivals.py); `-u` then caps the requests in flight. The master
splits each stage's rate evenly over the workers it has.

Without `--sweep` or `--rate` the shape behaves like Locust's plain -u/-r/-t run (one stage, index 0), so
every swarm locustfile can carry it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import gevent
import gevent.lock
from locust import LoadTestShape, events
from locust.runners import MasterRunner, WorkerRunner

from swarm.core.errors import UsageError
from swarm.load.arrivals import ARRIVALS, ArrivalSchedule
from swarm.load.stages import parse_rates, parse_sweep, parse_timespan

STAGE_MESSAGE = "swarm_stage"


@dataclass
class Stage:
    index: int
    users: int
    start_wall_s: float
    end_wall_s: float | None = None
    warmup_s: float = 0.0
    rate: float | None = None  # open loop: offered requests/s in total


def parse_seconds(text: str, option: str) -> float:
    try:
        return float(parse_timespan(str(text)))
    except UsageError as e:
        raise UsageError(f"{option}: {e}") from None


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    parser.add_argument(
        "--sweep",
        default="",
        include_in_web_ui=True,
        help="closed-loop concurrency stages, e.g. 10,30,64,128,200,256",
    )
    parser.add_argument(
        "--stage-time", default="30s", include_in_web_ui=True, help="duration of each stage (default 30s)"
    )
    parser.add_argument(
        "--rate",
        default="",
        include_in_web_ui=True,
        help="open-loop stages: requests/s, e.g. 5,10,20 (each lasts --stage-time; -u caps in-flight)",
    )
    parser.add_argument(
        "--arrivals",
        default="poisson",
        choices=ARRIVALS,
        include_in_web_ui=True,
        help="open-loop arrival process (default poisson)",
    )
    parser.add_argument(
        "--warmup",
        default="0s",
        include_in_web_ui=True,
        help="seconds at the start of each stage whose requests are excluded from its statistics",
    )


def _set_stage(
    environment: Any, index: int, warmup_s: float, rate_per_s: float | None = None, arrivals: str = "poisson"
) -> None:
    """Worker/local side: tag requests from now on; clear the warm-up flag after warmup_s;
    in open loop, pace this process's users at `rate_per_s`."""
    environment.swarm_arrivals = ArrivalSchedule(rate_per_s, arrivals) if rate_per_s else None
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
    environment.swarm_arrivals = None
    environment.swarm_arrival_gate = gevent.lock.Semaphore()  # see LLMUser.llm_request
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message(
            STAGE_MESSAGE,
            lambda msg, **_: _set_stage(
                environment,
                msg.data["index"],
                msg.data["warmup_s"],
                msg.data.get("rate_per_worker"),
                msg.data.get("arrivals", "poisson"),
            ),
        )


class SwarmShape(LoadTestShape):
    """Stages from --sweep (users) or --rate (open loop); otherwise Locust's -u/-r/-t."""

    use_common_options = True

    def __init__(self) -> None:
        super().__init__()
        self._current: int | None = None

    def _options(self) -> tuple[list[int], list[float], float, float]:
        """(user levels, rate levels, stage seconds, warm-up seconds); at most one list is non-empty."""
        opts = self.runner.environment.parsed_options
        sweep, rate = getattr(opts, "sweep", ""), getattr(opts, "rate", "")
        if sweep and rate:
            raise UsageError("--sweep (closed loop) and --rate (open loop) exclude each other: give one")
        if not sweep and not rate:
            return [], [], 0.0, 0.0
        stage_s, warmup_s = (
            parse_seconds(opts.stage_time, "--stage-time"),
            parse_seconds(opts.warmup, "--warmup"),
        )
        if rate:
            return [], parse_rates(rate), stage_s, warmup_s
        return parse_sweep(sweep), [], stage_s, warmup_s

    def reset_time(self) -> None:
        super().reset_time()
        self._current = None

    def _enter(self, index: int, users: int, warmup_s: float, rate: float | None = None) -> None:
        env = self.runner.environment
        self._current = index
        last = env.swarm_stages[-1] if env.swarm_stages else None
        if last is not None and last.index == index and last.end_wall_s is None:
            return  # Locust resets the shape's clock after the first tick: same stage, keep its start
        now = time.time()
        if last is not None:
            last.end_wall_s = now
        env.swarm_stages.append(Stage(index, users, now, None, warmup_s, rate))
        arrivals = getattr(env.parsed_options, "arrivals", "poisson")
        if isinstance(self.runner, MasterRunner):
            per_worker = rate / max(1, self.runner.worker_count) if rate else None
            _set_stage(env, index, warmup_s)
            self.runner.send_message(
                STAGE_MESSAGE,
                {
                    "index": index,
                    "warmup_s": warmup_s,
                    "users": users,
                    "rate_per_worker": per_worker,
                    "arrivals": arrivals,
                },
            )
        else:
            _set_stage(env, index, warmup_s, rate, arrivals)

    def _close(self) -> None:
        stages = self.runner.environment.swarm_stages
        if stages and stages[-1].end_wall_s is None:
            stages[-1].end_wall_s = time.time()

    def tick(self) -> tuple[int, float] | None:
        levels, rates, stage_s, warmup_s = self._options()
        t = self.get_run_time()
        opts = self.runner.environment.parsed_options
        if rates:  # open loop: -u users (the in-flight cap) throughout, the rate changes per stage
            index = int(t // stage_s) if stage_s > 0 else len(rates)
            if index >= len(rates):
                self._close()
                return None
            users = int(opts.num_users or 1)
            if index != self._current:
                self._enter(index, users, warmup_s, rates[index])
            return users, float(opts.spawn_rate or users)
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
