"""Load stages as a Locust `LoadTestShape`: closed-loop sweeps and open-loop rates.

`--sweep 10,30,64 --stage-time 30s [--warmup 5s]` runs each concurrency level for the stage
time (the plan: swarm/load/stages.py `StagePlan`). The master (or local runner) owns the clock;
on each stage change it sets the stage in its state (`environment.swarm.stage`) and broadcasts a
`swarm_stage` message so every worker tags the records it sends with the stage index
(`RequestRecord.stage`) and flags the first `--warmup` seconds of each stage
(`RequestRecord.warmup`, excluded from that stage's statistics). The stages as run are appended
to the state's timeline, from which summary.json takes each stage's window.

Open loop: `--rate 5,10,20 [--arrivals poisson|constant]` makes each stage a request rate
instead of a user count (swarm/load/arrivals.py); `-u` then caps the requests in flight. The master
splits each stage's rate evenly over the workers it has, and splits it again mid-stage when a
worker joins or leaves (`share_rate`), so the offered rate stays the stage's.

Without `--sweep` or `--rate` the shape behaves like Locust's plain -u/-r/-t run (one stage,
index 0), so every swarm locustfile can carry it.

`--reset-prefix-cache`: on each stage change, before the stage's load, the master (or local
runner) asks every endpoint to empty its prefix cache (vLLM's `POST /reset_prefix_cache`,
swarm/core/prefix_cache.py), so a stage finds no prefix another stage left; the log says, per
stage, which endpoints did and which do not offer it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import Any

import gevent
from locust import LoadTestShape, events
from locust.runners import MasterRunner, WorkerRunner

from swarm.client.on_time import SLOTS
from swarm.core.apikey import BoundKey
from swarm.core.prefix_cache import reset_prefix_cache
from swarm.core.urls import split_hosts
from swarm.live.state import run_settings, swarm_state
from swarm.load.arrivals import ArrivalSchedule
from swarm.load.stages import Stage, StagePlan

log = logging.getLogger(__name__)
RESET_TIMEOUT_S = 5.0  # --reset-prefix-cache: how long one endpoint's reset may take
TICK_S = 1.0  # Locust's shape worker ticks the shape once a second (runners.py shape_worker)

STAGE_MESSAGE = "swarm_stage"
WINDOW_MESSAGE = "swarm_window"  # master -> workers: the running stage's measurement window opens now
STAGE_REQUEST = "swarm_stage_request"  # worker -> master, at start-up


def _set_stage(
    environment: Any, index: int, warmup_s: float, rate_per_s: float | None = None, arrivals: str = "poisson"
) -> None:
    """Worker/local side: tag requests from now on; clear the warm-up flag after warmup_s;
    in open loop, pace this process's users at `rate_per_s`."""
    state = swarm_state(environment)
    state.arrivals = ArrivalSchedule(rate_per_s, arrivals) if rate_per_s else None
    SLOTS.reschedule()  # a user waiting for the old schedule's slot takes the new one's
    state.stage.index = index
    state.stage.warmup = warmup_s > 0
    if warmup_s > 0:

        def clear() -> None:
            if state.stage.index == index:
                state.stage.warmup = False

        gevent.spawn_later(warmup_s, clear)


def _reset_prefix_caches(environment: Any, index: int) -> None:
    """--reset-prefix-cache, before stage `index`: each endpoint's prefix cache emptied where offered."""
    hosts = split_hosts(getattr(environment, "host", None) or "")
    if not hosts:
        return
    key = BoundKey(run_settings(environment).llm.api_key, swarm_state(environment).key_origin)
    done, not_offered = [], []
    for host in hosts:
        base = host.rstrip("/")  # (split_hosts refuses a /v1: the base URL, a proxy's path prefix kept)
        (done if reset_prefix_cache(base, RESET_TIMEOUT_S, key) else not_offered).append(base)
    log.info(
        "swarm: stage %d: prefix cache emptied at %s%s",
        index + 1,
        ", ".join(done) or "no endpoint",
        f"; not offered (or failed) at {', '.join(not_offered)}" if not_offered else "",
    )


def _open_window_here(environment: Any, index: int) -> None:
    """Worker/local side: requests of stage `index` sent from now on are measured (no longer warm-up)."""
    state = swarm_state(environment)
    if state.stage.index == index:
        state.stage.warmup = False


def _stage_message(environment: Any, stage: Stage, workers: int) -> dict[str, Any]:
    """The `swarm_stage` message for `stage` (warm-up: what is left of it), over `workers` workers."""
    left = max(0.0, stage.warmup_s - (time.time() - stage.start_wall_s))
    return {
        "index": stage.index,
        "warmup_s": left,
        "users": stage.users,
        "rate_per_worker": stage.rate / max(1, workers) if stage.rate else None,
        "arrivals": run_settings(environment).arrivals,
    }


def _tell_joining_worker(environment: Any, client_id: str) -> None:
    """A worker that starts in the middle of a stage (a pod scaled up, a worker restarted) asks for
    the current stage (STAGE_REQUEST, sent once its handler is registered: a stage message sent on
    Locust's `worker_connect` would arrive before that and be dropped); otherwise it would tag its
    requests with stage 0 until the next stage change. In open loop every worker, the new one and
    those already running, then gets an even share of the stage's rate (`share_rate`)."""
    timeline = swarm_state(environment).stage.timeline
    runner = environment.runner
    if not timeline or timeline[-1].end_wall_s is not None:
        return
    joining = client_id not in runner.clients
    workers = runner.worker_count + joining
    runner.send_message(
        STAGE_MESSAGE, _stage_message(environment, timeline[-1], workers), client_id=client_id
    )
    share_rate(environment, workers)


def share_rate(environment: Any, workers: int | None = None) -> None:
    """Master, open loop: when the number of workers (`workers`, default the runner's live count)
    differs from the one the current stage's rate was split over, send every worker its new share
    (the stage index and warm-up unchanged). Called when a worker joins and on every bookkeeping
    tick (swarm/live/master.py), which notices workers that quit or went missing."""
    runner = environment.runner
    state = swarm_state(environment).stage
    timeline = state.timeline
    if not isinstance(runner, MasterRunner) or not timeline or timeline[-1].end_wall_s is not None:
        return
    stage = timeline[-1]
    workers = runner.worker_count if workers is None else workers
    if not stage.rate or workers < 1 or workers == state.rate_workers:
        return
    state.rate_workers = workers
    runner.send_message(STAGE_MESSAGE, _stage_message(environment, stage, workers))


@events.init.add_listener
def _on_init(environment: Any, **_kwargs: Any) -> None:
    swarm_state(environment)
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(
            STAGE_REQUEST, lambda msg, **_: _tell_joining_worker(environment, msg.node_id)
        )
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message(
            WINDOW_MESSAGE, lambda msg, **_: _open_window_here(environment, msg.data["index"])
        )
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
        environment.runner.send_message(STAGE_REQUEST, None)  # the current stage, if one runs


class SwarmShape(LoadTestShape):
    """Stages from --sweep (users) or --rate (open loop); otherwise Locust's -u/-r/-t."""

    use_common_options = True

    def __init__(self) -> None:
        super().__init__()
        self._current: int | None = None
        self._search: Any = None  # --search: the SearchController (swarm/live/search.py)
        self._guard: Any = None  # --rate: the over-saturation guard of the running stage
        self._skip_s = 0.0  # --rate: time skipped by stages the guard ended early
        self._settling: Any = None  # --sweep with --warmup: the running stage's settling test

    def reset_time(self) -> None:
        super().reset_time()
        self._current = None

    def _enter(self, index: int, users: int, warmup_s: float, rate: float | None = None) -> None:
        env = self.runner.environment
        timeline = swarm_state(env).stage.timeline
        self._current = index
        last = timeline[-1] if timeline else None
        if last is not None and last.index == index and last.end_wall_s is None:
            return  # Locust resets the shape's clock after the first tick: same stage, keep its start
        now = time.time()
        if last is not None:
            last.end_wall_s = now
        if run_settings(env).reset_prefix_cache:  # before the stage's load
            _reset_prefix_caches(env, index)
            now = time.time()
        timeline.append(Stage(index, users, now, None, warmup_s, rate))
        if isinstance(self.runner, MasterRunner):
            _set_stage(env, index, warmup_s)
            swarm_state(env).stage.rate_workers = self.runner.worker_count
            self.runner.send_message(
                STAGE_MESSAGE, _stage_message(env, timeline[-1], self.runner.worker_count)
            )
        else:
            _set_stage(env, index, warmup_s, rate, run_settings(env).arrivals)

    def _open_window(self, index: int, settled: bool) -> None:
        """The search's stage `index` has settled (or waited its longest): its warm-up ends now.
        The timeline records how long it took (`warmup_s`) and whether it settled."""
        env = self.runner.environment
        timeline = swarm_state(env).stage.timeline
        if not timeline or timeline[-1].index != index:
            return
        stage = timeline[-1]
        stage.warmup_s = time.time() - stage.start_wall_s
        stage.settled = settled
        _open_window_here(env, index)
        if isinstance(self.runner, MasterRunner):
            self.runner.send_message(WINDOW_MESSAGE, {"index": index})

    def _enter_settling(self, index: int, users: int, plan: StagePlan) -> None:
        """A --sweep stage. With --warmup, its window opens once it has settled (as the search's
        stages do: swarm/stats/settling.py `Settling`), no sooner than --warmup and no later than half
        the stage (or SETTLE_MAX_S): the stage keeps its length, its measured part what is left."""
        from swarm.stats.settling import SETTLE_MAX_S, Settling

        if plan.warmup_s <= 0:
            self._settling = None
            self._enter(index, users, 0.0)
            return
        bound = max(plan.warmup_s, min(SETTLE_MAX_S, plan.stage_s / 2))
        self._settling = Settling(time.time(), users, plan.warmup_s, bound)
        self._enter(index, users, bound)

    def _settle(self, index: int) -> None:
        from swarm.live.search import _aggregate

        agg = _aggregate(self.runner.environment)
        if agg is None:
            return
        now = time.time()
        cell = agg.combined(stage=index)
        self._settling.add(now, int(cell.warmup_ttft[0]), float(cell.warmup_ttft[1]))
        settled = self._settling.decide(now)
        if settled is not None:
            self._settling = None
            self._open_window(index, settled)

    def _close(self) -> None:
        timeline = swarm_state(self.runner.environment).stage.timeline
        if timeline and timeline[-1].end_wall_s is None:
            timeline[-1].end_wall_s = time.time()

    def _at_stage_end(self, t: float, stage_s: float, skip_s: float = 0.0) -> float:
        """`_at` the end of the stage running at shape time `t` (stages of `stage_s`, the clock
        `skip_s` ahead: time skipped by stages the guard ended early)."""
        return self._at((int((t + skip_s) // stage_s) + 1) * stage_s - skip_s)

    def _at(self, boundary_s: float) -> float:
        """The shape's clock now, or `boundary_s` once reached when it falls before the next tick
        (waiting here for it): Locust ticks a shape once a second, so a `-t 2s` run stopped after 3 s
        and every stage ended up to a second late."""
        t = self.get_run_time()
        if 0 < boundary_s - t < TICK_S:
            gevent.sleep(boundary_s - t)
            t = max(self.get_run_time(), boundary_s)
        return t

    def tick(self) -> tuple[int, float] | None:
        env = self.runner.environment
        settings = run_settings(env)
        if settings.search is not None:
            from swarm.live.search import SearchController

            if self._search is None:
                self._search = SearchController(env)
            return self._search.tick(self)
        plan = settings.plan
        t = self.get_run_time()
        if settings.trace is not None:  # --trace-replay: one stage, until every row is done
            users = settings.users or 1
            if self._current is None:
                self._enter(0, users, 0.0)
            replay = swarm_state(env).replay
            if (
                replay is not None and replay.dispatcher is not None
            ):  # (made at test start, after the 1st tick)
                replay.dispatcher.start()
                if replay.dispatcher.finished:
                    self._close()
                    return None
            return users, float(
                max(users, settings.spawn_rate or 0)
            )  # every user at once: none misses its row
        if plan.rates:  # open loop: -u users (the in-flight cap) throughout, the rate changes per stage
            t = self._at_stage_end(t, plan.stage_s, self._skip_s)
            index = int((t + self._skip_s) // plan.stage_s)
            if index >= len(plan.rates):
                self._close()
                return None
            users = settings.users or 1
            if index != self._current:
                self._enter(index, users, plan.warmup_s, plan.rates[index])
                from swarm.live.search import RateGuard

                self._guard = RateGuard.for_stage(env, index, plan.warmup_s, plan.rates[index])
            if self._guard is not None and self._guard.tripped():
                self._skip_s = (index + 1) * plan.stage_s - t  # the next stage starts now
            return users, float(settings.spawn_rate or users)
        if not plan.levels:  # plain run: one stage at -u users
            users = settings.users or 1
            if self._current is None:
                self._enter(0, users, 0.0)
            if settings.run_time_s and self._at(settings.run_time_s) >= settings.run_time_s:
                self._close()
                return None
            return users, float(settings.spawn_rate or users)
        t = self._at_stage_end(t, plan.stage_s)
        index = int(t // plan.stage_s)
        if index >= len(plan.levels):
            self._close()
            return None
        if index != self._current:
            self._enter_settling(index, plan.levels[index], plan)
        elif self._settling is not None:
            self._settle(index)
        users = plan.levels[index]
        return users, float(max(users, settings.spawn_rate or 0))


def stage_timeline(environment: Any) -> list[dict[str, Any]]:
    """The stages run so far, as plain dicts (for summary.json)."""
    return [asdict(s) for s in swarm_state(environment).stage.timeline]
