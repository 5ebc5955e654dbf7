"""`LLMUser`: a Locust FastHttpUser that sends one streamed completion per task and measures it.

The request path of one task: the workload mix draws an `LLMRequest` (swarm/load/request.py),
the server's dialect writes its body (swarm/client/dialects.py), the transport sends it and reads
the stream on the user's pooled socket, timing each read by the kernel's receive timestamp
(swarm/client/transport.py, clock.py), the stream tally fills a `RequestRecord`
(swarm/client/tally.py), and the user fires, exactly once each, the swarm's `llm_request(record=...)`
and Locust's `request` event (name = workload, response_time = E2E in ms, exception =
`LLMRequestFailure("outcome: message")` on failure). Nothing raises out of `send`: every
failure becomes one `Outcome`.

A stop that kills the user mid-request (`GreenletExit`) is recorded too, as `cancelled`, with what
was measured up to the cut, before the exit goes on: every request sent is recorded exactly once,
however the run stops. Cancelled requests fire the swarm's `llm_request` only, not Locust's
`request`: Locust has no outcome for them (as a success their cut E2E would enter its percentiles,
as a failure they would fail the run's exit code), and they did not complete; so do the requests
whose client hung up on purpose (`--cancel`: `cancelled_by_client`, swarm/load/cancel.py).

Several endpoints (`--host URL1,URL2,...`): each user holds one transport per endpoint (its own
Host and Authorization headers, the API key only where swarm/live/keyorigin.py allows it, on the
process's connection pool for that origin, shared by the users: swarm/client/shared_pool.py), and
each request goes where the process's balancer says
(`--balance`, swarm/live/balance.py); its record names the endpoint (`endpoint_label`, on every
record, one endpoint too). Locust itself sees the first endpoint as the user's host. Model and
dialect are discovered per endpoint (replicas or different engines side by side).

Importing this module registers the swarm's options and statistics with Locust (swarm/live/plugin.py).
"""

from __future__ import annotations

import itertools
import logging
import random
import secrets
import time
from typing import Any

import gevent
from locust import FastHttpUser, constant, events, task
from locust.runners import WorkerRunner

import swarm.live.plugin  # noqa: F401  (registers the swarm's options, statistics listeners and shape messages)
from swarm.client.clock import Clock
from swarm.client.discovery import ServedModel, discover
from swarm.client.on_time import SLOTS
from swarm.client.tally import StreamTally, TextTally, ToolTally
from swarm.client.tool_calls import judge
from swarm.client.transport import MALFORMED, CutPoint, failure
from swarm.core.apikey import scrub
from swarm.core.errors import LLMRequestFailure, SwarmError, UsageError
from swarm.core.records import NONE_WHEN_REQUIRED, Outcome, RequestRecord
from swarm.core.terminal import printable
from swarm.core.urls import endpoint_label, split_hosts
from swarm.live.endpoints import LENGTH, REQUEST_ID, Endpoint, make_endpoint
from swarm.live.gc_tuning import keep_young_collections_small, relax_full_collections
from swarm.live.keyorigin import bind
from swarm.live.locust_fixes import mark_internal_error
from swarm.live.options import LLMOptions, exit_on_usage_error
from swarm.live.prepare import check_models, draw_seed, prepare_workloads, prompt_tokenizer
from swarm.live.replay import WORKLOAD as REPLAY_WORKLOAD
from swarm.live.replay import prepare_replay, replay_task, trace_of
from swarm.live.state import INIT_WAIT_S, swarm_state, wait_for_init
from swarm.load.agent import AgentTask
from swarm.load.backoff import backoff_s
from swarm.load.cache_bust import bust
from swarm.load.cancel import CancelDraw
from swarm.load.request import LLMRequest
from swarm.load.sessions import Conversation
from swarm.stats import slo

log = logging.getLogger(__name__)
_users_made = itertools.count()  # this process's users, in the order made: the --cancel draw's user number


def llm_options(environment: Any) -> LLMOptions:
    """The validated options of this environment (cached; rebuilt at each test start)."""
    return swarm_state(environment).llm_options(environment)


def _validate(environment: Any) -> None:
    """Build options and every locustfile user's workload mix: raises UsageError on bad input."""
    state = swarm_state(environment)
    state.reset_options()
    state.endpoints = ()
    settings = state.settings(environment)
    staged = [
        flag
        for flag, given in (
            ("--sweep", settings.plan.levels),
            ("--rate", settings.plan.rates),
            ("--trace-replay", settings.trace),
        )
        if given
    ]
    if staged and getattr(environment, "shape_class", None) is None:
        raise UsageError(
            f"{staged[0]} needs the swarm's load shape, and this locustfile has none: add "
            "`from swarm.live.shape import SwarmShape` to it (swarm/locustfile.py has it)"
        )
    if not isinstance(getattr(environment, "runner", None), WorkerRunner):
        trace_of(environment)  # the trace's bad line, before anything starts (workers get rows, not the file)
    workloads = {REPLAY_WORKLOAD} if settings.trace is not None else set()
    for user_class in getattr(environment, "user_classes", None) or []:
        if isinstance(user_class, type) and issubclass(user_class, LLMUser):
            workloads.update(w.name for w, _ in state.mix(environment, user_class.workload).items)
            host = getattr(environment, "host", None) or user_class.host
            if host:  # http://[::1, a port past 65535, an empty or repeated item: before anything starts
                hosts = split_hosts(host)
                if not state.endpoints:
                    state.endpoints = tuple(endpoint_label(h) for h in hosts)
    objectives = settings.objectives or (settings.search.criteria if settings.search is not None else ())
    if objectives and workloads:  # --slo's WORKLOAD.METRIC: a workload of this run
        slo.check_workloads(objectives, workloads)


@events.init.add_listener
def _on_init(environment: Any, web_ui: Any = None, **_kwargs: Any) -> None:
    """Bad options: one line on stderr and exit code 2, before anything starts."""
    if getattr(environment, "parsed_options", None) is None:
        return
    try:
        _validate(environment)
        hosts = tuple(c.host for c in _llm_user_classes(environment) if c.host)
        bind(environment, web_ui, hosts)  # the key's origin (swarm/live/keyorigin.py)
    except UsageError as e:
        exit_on_usage_error(e)
    if not getattr(environment.parsed_options, "master", False):  # this process sends the requests
        keep_young_collections_small(lambda: swarm_state(environment).in_flight)
    else:  # the master: its heap grows with its workers (swarm/live/gc_tuning.py)
        relax_full_collections()


@events.test_start.add_listener
def _on_test_start(environment: Any, **_kwargs: Any) -> None:
    """Options may have changed in the web UI: validate again; on error stop with exit code 2."""
    if not wait_for_init(environment):  # a worker joining a running test: Locust is still connecting it
        # Nothing can be prepared without the statistics side: the run exits 2 naming this worker's
        # log (its reports say internal_error), and the worker leaves once Locust has its runner.
        log.error(
            "swarm: Locust did not finish connecting this worker in %.0f s: it leaves the run", INIT_WAIT_S
        )
        mark_internal_error()
        gevent.spawn(_quit_once_connected, environment)
        return
    state = swarm_state(environment)
    state.served_at.clear()
    state.balancers.clear()  # each test starts with every endpoint in the balance
    try:
        draw_seed(environment)  # (into the options: the settings built next hold it)
        _validate(environment)
        check_models(environment, _llm_user_classes(environment))
        prepare_workloads(environment, _llm_user_classes(environment))
        classes = _llm_user_classes(environment)
        prepare_replay(
            environment,
            lambda: prompt_tokenizer(
                environment, classes[0].host or "" if classes else "", True, "trace replay"
            ),
        )
    except SwarmError as e:  # (its text may quote the target: scrubbed, one printable line)
        log.error("%s", printable(scrub(str(e), getattr(environment.parsed_options, "api_key", None))))
        environment.process_exit_code = 2
        runner = getattr(environment, "runner", None)
        if runner is not None:
            gevent.spawn_later(0, runner.quit)


def _quit_once_connected(environment: Any) -> None:
    while getattr(environment, "runner", None) is None:
        gevent.sleep(0.5)
    environment.runner.quit()


def _llm_user_classes(environment: Any) -> list[type]:
    classes = getattr(environment, "user_classes", None) or []
    return [c for c in classes if isinstance(c, type) and issubclass(c, LLMUser)]


class LLMUser(FastHttpUser):
    """Sends streamed chat/completions requests drawn from a workload mix; one record each.

    Subclass it in a locustfile and set `workload` (a NAME or NAME:W,NAME:W spec); the
    `--workload` option overrides it. All other settings are Locust options (see --help).
    """

    abstract = True
    workload: str = "mixed"
    wait_time = constant(0)

    def __init__(self, environment: Any) -> None:
        self.state = swarm_state(environment)
        self.opts = self.state.llm_options(environment)
        self.network_timeout = self.opts.request_timeout
        self.connection_timeout = self.opts.request_timeout
        hosts = split_hosts(self.host) if self.host else ()
        if hosts:
            self.host = hosts[0]  # Locust's own client (and anything else of it) sees one URL: the first
        super().__init__(environment)
        Clock.probe()  # here, at spawn: not inside the first request's timing
        self.mix = self.state.mix(environment, type(self).workload)
        self.split = self.opts.split  # --model a:3,b:1: each request draws its model (None: one model)
        self.rng = random.Random()
        self._secret = self.opts.api_key or None  # scrubbed from the error messages a server sends
        self._chat = self.opts.endpoint == "chat"
        self.endpoints = tuple(make_endpoint(environment, self.client, self.opts, h) for h in hosts)
        self._ids = self.state.request_ids(environment)  # this process's X-Request-Id per request
        self.balancer = self.state.balancer(tuple(e.label for e in self.endpoints), self.opts.balance)
        # conversations (chat_session, swarm/load/sessions.py): the one this user holds, if any
        self._sessions = any(getattr(w, "sessions", False) for w, _ in self.mix.items)
        # agents (swarm/load/agent.py): a task of tool-calling steps per arrival
        self._agents = any(getattr(w, "agent", False) for w, _ in self.mix.items)
        self._tasks_started = 0
        self._tool_tally: ToolTally | None = None  # the last agent step's tally
        self._t_send = 0.0  # perf_counter() when the last request was sent (its E2E's start)
        self.conversation: Conversation | None = None
        self._session_workload: Any = None
        self._session_prefix = secrets.token_hex(6)
        self._sessions_started = 0
        self._answer = ""  # the last conversation turn's answer text
        self._failures = 0  # failed requests in a row (a success resets; cancelled ones leave it)
        self._pause_s = 0.0  # the backoff the last request earned (`backoff_s`), taken in closed loop
        self._jitter = random.Random()  # apart from `rng`: a seeded run draws the same requests
        header = self.opts.session_header
        self._session_header = f"{header}: ".encode("latin-1") if header else None  # --session-header
        settings = self.state.settings(environment)
        cancel = settings.cancel  # --cancel: this user's draws, from the run's seed (swarm/load/cancel.py)
        self._cancel: CancelDraw | None = None
        if cancel is not None:
            worker = int(getattr(environment.runner, "worker_index", 0) or 0)
            self._cancel = CancelDraw(cancel.share, settings.seed, worker, next(_users_made))
        self._cut = CutPoint(cancel.after_s, cancel.after_tokens, cancel.when) if cancel else CutPoint()
        # --prefix-cache bust: a tag unique to this user, and a count of its requests
        self._bust, self._bust_tag, self._bust_n = settings.bust_prefix, secrets.token_hex(4), 0

    @task
    def llm_request(self) -> None:
        state = self.state
        if state.replay is not None:  # --trace-replay (swarm/live/replay.py): the next row, at its time
            replay_task(self)
            return
        schedule = state.arrivals
        if schedule is None:
            if self.state.settings(self.environment).open_loop:
                gevent.sleep(0.05)  # open loop, but the master's first stage message is not here yet
                return
            if self._agents:
                self._agent_task()
            elif self._sessions:
                self._session_turn(think=True)
            else:  # closed loop: send as soon as the last answer is in ...
                self.send(self.mix.next_request(self.rng))
            self._back_off()  # ... unless it failed (closed loop only: open loop keeps its schedule)
            return
        # Open loop (swarm/load/arrivals.py): free users wait in line (swarm/client/on_time.py), the
        # one at its head sleeping until the next arrival slot, so a rate change never finds users
        # parked on old slots; a slot that comes while every user is busy makes the measured lateness.
        # The schedule is read when a user reaches the head: users that joined the line before a
        # stage change (or a new share of the rate) would otherwise take the old schedule's slots,
        # now in the past, and leave in one burst.
        slot = SLOTS.wait_for_slot(lambda: (state.arrivals or schedule).next_slot())
        if state.stopping:  # the stop began while this user waited for its slot: Locust lets a task end
            return  # gracefully, and in open loop that wait is the task; sending now would add load
        if self._agents:  # open loop: each arrival starts a task (its steps follow one another)
            self._agent_task(send_lag_s=max(0.0, time.perf_counter() - slot))
            return
        if self._sessions:  # open loop: each arrival sends this user's next turn (no think time)
            self._session_turn(send_lag_s=max(0.0, time.perf_counter() - slot))
            return
        self.send(self.mix.next_request(self.rng), send_lag_s=max(0.0, time.perf_counter() - slot))

    # -- conversations (chat_session) -----------------------------------------------------------

    def _new_conversation(self, workload: Any) -> Conversation:
        self._sessions_started += 1
        self._session_workload = workload
        conv = self.conversation = workload.start(
            self.rng, f"{self._session_prefix}-{self._sessions_started}"
        )
        return conv

    def _session_turn(self, send_lag_s: float | None = None, think: bool = False) -> None:
        """Send this user's next conversation turn (a new conversation when none is going on; a
        request of another workload when the mix draws one between conversations)."""
        conv = self.conversation
        if conv is None or conv.done:
            w = self.mix.draw(self.rng)
            if not getattr(w, "sessions", False):
                self.send(w.next_request(self.rng), send_lag_s=send_lag_s)
                return
            conv = self._new_conversation(w)
        elif think:  # closed loop: the user reads the answer and types; not load (not in flight)
            pause = self._session_workload.think(self.rng)
            if pause > 0:
                gevent.sleep(pause)
        req = conv.next_request()
        served = self.state.served
        limit = served.max_model_len if served is not None else None
        if (
            req is not None
            and limit is not None
            and conv.turn > 0
            and conv.prompt_estimate(req) + req.max_tokens > limit
        ):  # the history no longer fits the context: a new conversation, the cut counted
            stats = self.state.stats
            if stats is not None and stats.count_cut is not None:
                stats.count_cut()
            conv = self._new_conversation(self._session_workload)
            req = conv.next_request()
        if req is None:  # a dataset conversation without user messages
            self.conversation = None
            return
        record = self.send(req, send_lag_s=send_lag_s, session=conv)
        if record.outcome is Outcome.OK:
            conv.answered(req, self._answer, record.prompt_tokens, record.output_tokens)
        else:
            conv.failed()

    # -- agents (agent: tasks of tool-calling steps) ---------------------------------------------

    def _agent_task(self, send_lag_s: float | None = None) -> None:
        """Run one task to its end: each step sent, its calls judged, the tools' time slept (in the
        task, never in a request); a request of another workload when the mix draws one."""
        w = self.mix.draw(self.rng)
        if not getattr(w, "agent", False):
            self.send(w.next_request(self.rng), send_lag_s=send_lag_s)
            return
        self._tasks_started += 1
        task: AgentTask = w.start(self.rng, f"{self._session_prefix}-t{self._tasks_started}")
        while True:
            self.send(task.next_request(), send_lag_s=send_lag_s, agent=task)
            send_lag_s = None  # (a task's later steps were not scheduled: they follow the last)
            if task.ended or self.state.stopping:
                return
            pause = w.tool_latency(self.rng)
            if pause > 0:
                gevent.sleep(pause)

    def _agent_step(self, task: AgentTask, record: RequestRecord) -> None:
        """Judge an agent step's calls into `record` and carry the task on (before the record is
        fired: the last step's record carries the task's duration). The step's `tool_s` is the time
        from the last step's end to this one's send: the tools' time and the client's own between
        the two (the first step's is 0), so a task's steps' E2E and tool times add up to it."""
        sent = self._t_send
        record.tool_s = 0.0 if task.last_end is None else sent - task.last_end
        if task.t_start is None:
            task.t_start = sent
        task.last_end = sent + (record.e2e_s or 0.0)
        tally = self._tool_tally
        if record.outcome is not Outcome.OK or tally is None:
            task.failed()
        else:
            calls = tally.assembler.ordered()
            verdict = judge(calls, task.workload.tools.required, tally.finish_reason)
            record.tool_calls, record.tool_calls_valid, record.tool_error = (
                verdict.calls,
                verdict.valid,
                verdict.reason,
            )
            if not calls and task.requires_call:
                record.tool_error = NONE_WHEN_REQUIRED
            task.answered([c.message() for c in calls], self.rng)
            if verdict.reason is not None:  # an invalid call: nothing sound to go on with
                task.ended = True
        if task.ended and record.outcome is Outcome.OK:  # (a failed or cut task has no duration)
            record.task_s = task.last_end - task.t_start

    def served(self, endpoint: Endpoint) -> ServedModel:
        """`endpoint`'s model and dialect, from the options or (once per process) from its /v1/models."""
        state = self.state
        s = state.served_at.get(endpoint.label)
        if s is not None and s.fresh():
            return s
        with state.served_lock:
            s = state.served_at.get(endpoint.label)
            if s is not None and s.fresh():
                return s
            opts = self.opts
            # (a split's models were checked at test start, swarm/live/prepare.py `check_models`; one
            # that went away since is answered with the server's 404 per request, recorded as such)
            s = state.served_at[endpoint.label] = discover(
                endpoint.transport.get, endpoint.prefix, opts.model, opts.dialect, opts.ignore_eos
            )
        return s

    # -- one request ---------------------------------------------------------------------------

    def send(
        self,
        req: LLMRequest,
        send_lag_s: float | None = None,
        session: Conversation | None = None,
        trace_row: int | None = None,
        agent: AgentTask | None = None,
    ) -> RequestRecord:
        """Send `req`, stream the answer, fire the events; returns the record. Never raises, but
        for the greenlet being killed: after recording a sent request as `cancelled`. `session`: the
        conversation `req` is the next turn of (its answer text is kept in `self._answer`)."""
        stage = self.state.stage
        record = RequestRecord(
            workload=req.workload,
            start_wall_s=time.time(),
            send_lag_s=send_lag_s,
            stage=stage.index,
            warmup=stage.warmup,
            request_class=req.request_class or ("thinking" if req.thinking else "direct"),
            model=self.split.draw(self.rng) if self.split is not None else "",
            trace_row=trace_row,
        )
        if session is not None:
            record.session_id = session.id
            record.turn = session.turn + 1
        if agent is not None:
            record.task_id = agent.id
            record.step = agent.step + 1
            self._tool_tally = None  # (set by this step's exchange once it has a body to send)
        i = self.balancer.pick()  # counted in flight there until `done` below
        endpoint = self.endpoints[i]
        record.endpoint = endpoint.label
        self.state.in_flight += 1  # until _fire, which every path reaches
        n_bytes = self._exchange(req, record, session, trace_row, endpoint)
        outcome = record.outcome
        if outcome is not Outcome.OK:
            record.tpot_s = None
            if not outcome.failed and record.prompt_tokens is None:  # cut by the stop or its client
                record.prompt_tokens = req.prompt_tokens  # the server's count, when the workload knows it
        self.balancer.done(i, outcome)
        if agent is not None:
            self._agent_step(agent, record)
        self._fire(record, n_bytes, endpoint.url)
        transport = endpoint.transport
        cut = transport.cut
        if cut is not None:  # the stop that cancelled it goes on, now that the request is recorded
            transport.cut = None
            raise cut
        if outcome is Outcome.OK:
            self._failures = 0
        elif outcome.failed:
            self._failures += 1
        self._pause_s = backoff_s(self._failures, self._jitter) if outcome.failed else 0.0
        return record

    def _exchange(
        self,
        req: LLMRequest,
        record: RequestRecord,
        session: Conversation | None,
        trace_row: int | None,
        endpoint: Endpoint,
    ) -> int:
        """Write the body, send it and tally the stream into `record`, its outcome and error set
        (any exception of ours an `internal` outcome); returns the bytes read."""
        n_bytes = 0
        t0 = self._t_send = time.perf_counter()
        transport = endpoint.transport
        try:
            served = self.served(endpoint)
            if not record.model:
                record.model = served.model or ""
            chat = self._chat
            messages = req.messages if chat else None
            prompt = None if chat else req.prompt_text()
            salt = None
            if self._bust:  # --prefix-cache bust: vLLM's cache_salt, else a unique leading text
                messages, prompt, salt = self._busted(served, messages, prompt)
            body = served.dialect.body(
                endpoint="chat" if chat else "completions",
                model=record.model or None,
                messages=messages,
                prompt=prompt,
                max_tokens=req.max_tokens,
                thinking=req.thinking,
                ignore_eos=self.opts.ignore_eos or req.ignore_eos,
                user=None if trace_row is None else f"trace-row-{trace_row}",
                cache_salt=salt,
                tools=req.tools,
                tool_choice=req.tool_choice,
            )
            head = transport.head
            if session is not None:
                tally: StreamTally = TextTally(served.dialect, chat)
                if self._session_header is not None:  # before the head's closing X-Request-Id
                    head = head[: -len(REQUEST_ID)] + self._session_header + session.id.encode() + b"\r\n"
                    head += REQUEST_ID
            elif req.tools is not None:  # an agent step: tool calls assembled (other requests never pay)
                tally = self._tool_tally = ToolTally(served.dialect, chat)
            else:
                tally = StreamTally(served.dialect, chat)
            data = head + self._ids.next() + LENGTH + str(len(body)).encode() + b"\r\n\r\n" + body
            t0 = self._t_send = time.perf_counter()
            record.start_wall_s = time.time()  # (after t0: start_wall_s + ttft_s errs late, never early)
            cut = self._cancel is not None and self._cancel.next()  # --cancel: this one hangs up
            outcome, error, t_end, n_bytes = transport.exchange(
                data, tally, record, self._cut if cut else None
            )
            try:
                tally.fill(record, t0, t_end)
            except MALFORMED as e:  # e.g. usage of another shape
                outcome, error = failure(e, "tally", transport.timeout)
            if record.request_id is None:
                record.request_id = tally.response_id
            if session is not None:
                self._answer = tally.text  # type: ignore[attr-defined]
        except Exception as e:  # a bug of ours, not the server's: still one record, never a raise
            t_end = time.perf_counter()
            outcome, error = failure(
                e, "internal", transport.timeout, answered=record.http_status is not None
            )
            _log_once(
                type(e).__name__, "swarm.live.user: unexpected error while sending a request", exc_info=True
            )
            record.e2e_s = t_end - t0
        if error:  # the target's words: the key scrubbed in any case or part, one printable line
            error = printable(scrub(error, self._secret))
        record.outcome = outcome
        record.error = error
        return n_bytes

    def _busted(
        self, served: ServedModel, messages: list[dict[str, Any]] | None, prompt: str | None
    ) -> tuple[list[dict[str, Any]] | None, str | None, str | None]:
        """--prefix-cache bust: (messages, prompt, cache_salt) of one request, its prefix unique."""
        self._bust_n += 1
        salt = served.dialect.takes_salt
        if "bust" not in _logged:  # said once per process, in the run's output
            _logged.add("bust")
            how = "a unique cache_salt" if salt else "no cache_salt: a unique leading tag of a few tokens"
            log.warning("swarm: --prefix-cache bust (%s): each request has %s", served.dialect.name, how)
        return bust(messages, prompt, f"{self._bust_tag}-{self._bust_n}", salt)

    def _back_off(self) -> None:
        """Closed loop: after a failed request, pause before the next one (swarm/load/backoff.py).
        Open loop and trace replay never pause: their schedule is the load, a failing target gets
        the rate asked for and no more, and a pause would only make later slots leave late, in a
        burst."""
        pause, self._pause_s = self._pause_s, 0.0
        if pause > 0 and not self.state.stopping:
            gevent.sleep(pause)

    def _fire(self, record: RequestRecord, n_bytes: int, url: str) -> None:
        self.state.in_flight -= 1
        self.state.llm_request.fire(record=record)
        outcome = record.outcome
        if outcome is not Outcome.OK and not outcome.failed:  # cut (stop, client): no Locust outcome
            return
        e2e_ms = (record.e2e_s or 0.0) * 1000.0
        exc = None if record.outcome is Outcome.OK else LLMRequestFailure(record.outcome, record.error or "")
        self.environment.events.request.fire(
            request_type="POST",
            name=record.workload,
            response_time=e2e_ms,
            response_length=n_bytes,
            exception=exc,
            context={},
            url=url,
            start_time=record.start_wall_s,
            response=None,
        )


_logged: set[str] = set()


def _log_once(key: str, msg: str, **kwargs: Any) -> None:
    if key not in _logged:
        _logged.add(key)
        log.error(msg, **kwargs)


__all__ = ["LLMUser", "llm_options"]
