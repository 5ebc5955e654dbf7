"""The swarm's state in one Locust process, typed, on the environment: `environment.swarm`.

Everything the user, the load shape and the statistics plugin share lives here instead of in
loose `environment.swarm_*` attributes: the current stage (set by the shape, copied into each
record at send), open-loop arrivals, the validated options and workload mixes, the model and
dialect the users discovered, narrow handles on the statistics side of this process, the trace
replay's side, and the `llm_request` hook.

It holds handles, not the modules that own them: swarm/live/plugin.py imports this module, so
the state names no type of the plugin's (`StatsHandles` is what the others need of it), and the
replay's types come from swarm/live/replay_schedule.py, which imports nothing else of live/.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.lock
from locust.event import EventHook

from swarm.client.discovery import ServedModel
from swarm.client.request_ids import RequestIds
from swarm.core.events import llm_request
from swarm.live.balance import Balancer
from swarm.live.options import LLMOptions
from swarm.live.replay_schedule import Replay
from swarm.live.settings import RunSettings, TraceSettings
from swarm.load.arrivals import ArrivalSchedule
from swarm.load.stages import StageState
from swarm.load.trace import Trace
from swarm.load.workloads import Mix
from swarm.stats.aggregate import Aggregate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatsHandles:
    """What the rest of the process reaches of its statistics side (swarm/live/plugin.py
    `StatsPlugin`, which fills this in at `init`): no more than that."""

    # master side: the merged aggregate, a local runner's latest records pulled in first
    merged: Callable[[], Aggregate] | None = None
    count_cut: Callable[[], None] | None = None  # worker side: one conversation cut at max_model_len


@dataclass
class SwarmState:
    stage: StageState = field(default_factory=StageState)
    arrivals: ArrivalSchedule | None = None  # open loop: this process's share of the rate
    # trace replay's rows, one user at a time (swarm/live/replay.py); open loop's users wait in
    # swarm/client/on_time.py's line instead
    arrival_gate: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)
    options: RunSettings | None = None  # parsed at init and at each test start (swarm/live/settings.py)
    mixes: dict[str, Mix] = field(default_factory=dict)  # workload spec -> its mix
    # model and dialect of each endpoint (its label -> what the options or its /v1/models say)
    served_at: dict[str, ServedModel] = field(default_factory=dict)
    endpoints: tuple[str, ...] = ()  # the endpoints' labels, the first one Locust's host (set at init)
    # (endpoint URLs, --balance) -> this process's balancer over them (swarm/live/balance.py)
    balancers: dict[tuple[tuple[str, ...], str], Balancer] = field(default_factory=dict)
    served_lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)
    stats: StatsHandles | None = None  # this process's statistics side (set at init: swarm/live/plugin.py)
    llm_request: EventHook = llm_request  # fired once per finished request with record=
    seed_given: bool | None = None  # --seed given by the user (None: not known yet); see live/prepare.py
    in_flight: int = 0  # this process's requests sent and not yet recorded (LLMUser.send)
    stopping: bool = False  # the stop has begun (test_stopping): open-loop users send no new request
    replay: Replay | None = None  # trace replay (swarm/live/replay.py); None: not replaying
    # --trace-replay's trace, loaded once per process: (the settings it was loaded with, it)
    trace: tuple[TraceSettings, Trace] | None = None
    search: dict[str, Any] | None = None  # --search: the result (summary.json `search`), set when it ends
    # the origin(s) the API key is sent to, comma-separated (swarm/live/keyorigin.py)
    key_origin: str | None = None
    _request_ids: RequestIds | None = None  # made on first use (`request_ids`)

    def settings(self, environment: Any) -> RunSettings:
        """This process's options, parsed (cached; `reset_options` before a new test)."""
        if self.options is None:
            self.options = RunSettings.from_parsed(getattr(environment, "parsed_options", None))
            self.mixes = {}
        return self.options

    def request_ids(self, environment: Any) -> RequestIds:
        """This process's X-Request-Id source, one for all its users (swarm/client/request_ids.py)."""
        if self._request_ids is None:
            self._request_ids = RequestIds(self.settings(environment).run_id)
        return self._request_ids

    def llm_options(self, environment: Any) -> LLMOptions:
        """What each request carries of the options (`settings(environment).llm`)."""
        return self.settings(environment).llm

    @property
    def served(self) -> ServedModel | None:
        """The first endpoint's model and dialect (the one the run's model name and limits come from)."""
        return self.served_at.get(self.endpoints[0]) if self.endpoints else None

    def balancer(self, labels: tuple[str, ...], policy: str) -> Balancer:
        """This process's balancer over the endpoints `labels` (made on first use)."""
        b = self.balancers.get((labels, policy))
        if b is None:
            b = self.balancers[(labels, policy)] = Balancer(labels, policy)
        return b

    def reset_options(self) -> None:
        self.options = None
        self.mixes = {}

    def mix(self, environment: Any, default_spec: str) -> Mix:
        """The workload mix for `--workload`, else the user class's `default_spec`."""
        opts = self.llm_options(environment)
        spec = opts.workload or default_spec
        mix = self.mixes.get(spec)
        if mix is None:
            mix = self.mixes[spec] = Mix.from_spec(spec, opts.knobs)
        return mix


def swarm_state(environment: Any) -> SwarmState:
    """This environment's state, created on first use."""
    state = getattr(environment, "swarm", None)
    if state is None:
        state = environment.swarm = SwarmState()
    return state


INIT_WAIT_S = 30.0


def wait_for_init(environment: Any) -> bool:
    """On a worker, wait until Locust has set `environment.runner` and fired `init` (the swarm's
    statistics side exists). A worker that joins a running test gets the master's spawn, and fires
    `test_start`, while Locust is still connecting it: `WorkerRunner.connect_to_master` waits for
    the master's ack, and the spawn right behind it is handled meanwhile, before
    `create_worker_runner` returns (Locust 2.47). A trace replay prepared then took the worker
    for a local runner and never took a row. False when it does not come in INIT_WAIT_S."""
    if not getattr(getattr(environment, "parsed_options", None), "worker", False):
        return True
    t0 = time.monotonic()
    while getattr(environment, "runner", None) is None or swarm_state(environment).stats is None:
        if time.monotonic() - t0 > INIT_WAIT_S:
            return False
        gevent.sleep(0.01)
    if time.monotonic() > t0 + 0.005:
        log.info(
            "swarm: test start while Locust was connecting this worker: waited %.2f s for it",
            time.monotonic() - t0,
        )
    return True


def run_settings(environment: Any) -> RunSettings:
    """This environment's options, parsed once (swarm/live/settings.py)."""
    return swarm_state(environment).settings(environment)
