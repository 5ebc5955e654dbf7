"""HTTP side of the simulator: the OpenAI endpoints, /health and /metrics on aiohttp, in the
shapes of the server it speaks as (its face: swarm/sim/faces.py: vLLM, llama.cpp, SGLang, TGI,
TensorRT-LLM or Ollama; the face names its /health, /metrics and extra GET paths).

A generation handler parses the request, draws its fault and lengths (one seeded RNG, in
arrival order), hands a `Sequence` to the engine and then writes whatever tokens the engine
has produced since its last write in ONE write, so chunks coalesce when the loop is busy.
Every /v1 response carries `x-request-id`: the request's own `X-Request-Id` when it sent one (as
vLLM started with --enable-request-id-headers echoes it; the response `id` is then the face's
prefix + that id, as vLLM builds it), else the response `id`; a generation request's trace line
carries the same id, so records join the trace on it. Every generation request leaves one trace
line, written before its last bytes go out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from swarm.core.tokens import count_tokens
from swarm.sim import tool_calls
from swarm.sim.delivery import Delivery, FrontEnd, delivery
from swarm.sim.engine import ABORTED, Engine, Sequence, prompt_block_hashes
from swarm.sim.faces import Renderer, get_face
from swarm.sim.faults import HTTP_FAULTS, FaultPlan, fault_position
from swarm.sim.metrics import CONTENT_TYPE
from swarm.sim.profile import Profile
from swarm.sim.protocol import ApiError, GenRequest
from swarm.sim.render import DONE, TAPE_BITS, Output, PromptDetails, Tape, token_texts
from swarm.sim.trace import SESSION_HEADER, TraceRecord, TraceWriter

MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass
class SimConfig:
    profile: Profile
    model: str = "sim-model"  # the first (base) served model
    models: tuple[str, ...] = ()  # every served model (LoRA adapters too); () = (model,)
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    faults: FaultPlan = field(default_factory=FaultPlan)
    trace_path: str | None = None
    seed: int = 0
    server: str = "vllm"  # the server it speaks as: a name in swarm/sim/faces.py FACES
    frontend_s_per_chunk: float = 0.0  # API server time per streamed event (swarm/sim/delivery.py)
    api_server_count: int = 1  # lanes that front-end time is spread over
    network_delay_s: float = 0.0  # one-way delay of every streamed write
    # vLLM's --enable-prompt-tokens-details: usage says the cached prompt tokens (llama.cpp: always)
    prompt_tokens_details: bool = False


@dataclass(slots=True)
class _Call:
    """One generation request in flight: what was asked, what it will produce, what happened."""

    req: GenRequest
    out: Output
    seq: Sequence
    rec: TraceRecord
    fault: str | None
    fault_at: int  # tokens sent before a mid-stream fault fires (-1: none)
    thinking: bool
    model: str  # the served model it named


class SimServer:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.profile = p = cfg.profile
        self.engine = Engine(p)
        self.served = cfg.models or (cfg.model,)
        self.tape = Tape.build(cfg.seed, p.utf8_split, p.reasoning_field)
        self.rng = random.Random(cfg.seed)
        self.trace = TraceWriter(cfg.trace_path) if cfg.trace_path else None
        self._auth = f"Bearer {cfg.api_key}" if cfg.api_key else None
        self.prompt_details = (
            PromptDetails(p.block_size, p.prefix_caching) if cfg.prompt_tokens_details else None
        )
        self.face = get_face(cfg.server)(p, self.served, self.prompt_details)
        self.metrics = self.face.metrics(self.engine)
        self._other_ids = itertools.count(1)  # ids of non-generation responses (keeps self.rng seeded-only)
        self.frontend = (
            FrontEnd(cfg.api_server_count, cfg.frontend_s_per_chunk) if cfg.frontend_s_per_chunk > 0 else None
        )

    # ---- app ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        for path in self.face.health_paths:
            app.router.add_get(path, self.health)
        if self.face.metrics_path is not None:
            app.router.add_get(self.face.metrics_path, self.metrics_page)
        for path, answer in self.face.extra_gets().items():
            app.router.add_get(path, _extra_get(answer))
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/detokenize", self.detokenize)
        if self.face.resets_prefix_cache:
            app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        for path, answer in self.face.extra_posts().items():
            app.router.add_post(path, self._extra_post(answer))
        app.router.add_route("*", self.face.fallback_path, self.no_route)  # last: unknown paths and methods
        return app

    async def no_route(self, request: web.Request) -> web.Response:
        """The face's answer to an unknown path or method, with an x-request-id like every /v1 response."""
        body, status = self.face.not_found(request.path)
        return _json(body, status, f"req-{next(self._other_ids)}")

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """vLLM's `POST /reset_prefix_cache`: 200 with an empty body; the cached blocks no running
        request holds are forgotten, so the next run starts cold."""
        self.engine.reset_prefix_cache()
        return web.Response(status=200)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200, **self.face.health)

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def models(self, request: web.Request) -> web.Response:
        rid = f"req-{next(self._other_ids)}"
        if self._auth and request.headers.get("Authorization") != self._auth:
            return self._unauthorized(rid)
        return _json(self.face.models_body(int(time.time())), 200, rid)

    async def tokenize(self, request: web.Request) -> web.Response:
        """`/tokenize` in the face's shape, counted with the pseudo-tokenizer the engine uses."""
        rid = f"req-{next(self._other_ids)}"
        if self._auth and request.headers.get("Authorization") != self._auth:
            return self._unauthorized(rid)
        try:
            answer = self.face.tokenize(await request.read())
        except ApiError as e:
            return _json(e.body(), e.status, rid)
        return _json(orjson.dumps(answer), 200, rid)

    async def detokenize(self, request: web.Request) -> web.Response:
        """`/detokenize`: the text of ids this server's /tokenize answered (vLLM's or llama.cpp's shape)."""
        rid = f"req-{next(self._other_ids)}"
        if self._auth and request.headers.get("Authorization") != self._auth:
            return self._unauthorized(rid)
        try:
            answer = self.face.detokenize(await request.read())
        except ApiError as e:
            return _json(e.body(), e.status, rid)
        return _json(orjson.dumps(answer), 200, rid)

    def _extra_post(
        self, answer: Callable[[bytes], dict[str, Any]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        """The handler of one of the face's own POST routes (llama.cpp's /apply-template)."""

        async def handle(request: web.Request) -> web.Response:
            rid = f"req-{next(self._other_ids)}"
            try:
                body = answer(await request.read())
            except ApiError as e:
                return _json(e.body(), e.status, rid)
            return _json(orjson.dumps(body), 200, rid)

        return handle

    @staticmethod
    def _unauthorized(rid: str) -> web.Response:
        return _json(b'{"error":"Unauthorized"}', 401, rid)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    # ---- generation -------------------------------------------------------------------------
    def _write_trace(self, rec: TraceRecord) -> None:
        if rec.end_time is None:
            rec.end_time = time.time()
        if self.trace is not None:
            self.trace.write(rec)

    def _trace_answer(self, rec: TraceRecord, call: _Call) -> None:
        """A finished answer's content as the pseudo-tokenizer counts it (traced only): what a
        conversation's next turn resends as the assistant message."""
        if self.trace is not None and call.out.tool_plan is None:
            rec.answer_tokens = count_tokens(token_texts(self.tape, call.out, rec.completion_tokens)[1])

    async def _generate(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        arrival = time.time()
        rng = self.rng
        drawn = f"{rng.getrandbits(128):032x}"  # (drawn either way: the seeded draws stay in step)
        sent = request.headers.get("X-Request-Id") if self.face.takes_request_id else None  # vLLM: its base
        rid = f"{self.face.id_prefixes[endpoint]}{sent or drawn}"
        rec = TraceRecord(id=sent or rid, arrival_time=arrival, endpoint=endpoint)  # as x-request-id says
        rec.session = request.headers.get(SESSION_HEADER)
        if self._auth and request.headers.get("Authorization") != self._auth:
            rec.status = 401
            self._write_trace(rec)
            return self._unauthorized(rec.id)
        try:
            try:
                raw = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise ApiError(
                    413, f"Request body larger than {MAX_BODY_BYTES} bytes.", "BadRequestError"
                ) from None
            body, model, req = self.face.parse(raw, endpoint)
            user = body.get("user")
            rec.user = user if isinstance(user, str) else None
            stream = body.get("stream", False)
            rec.stream = stream if isinstance(stream, bool) else None
            salt = body.get("cache_salt")
            if self.face.takes_cache_salt and salt is not None and (not isinstance(salt, str) or not salt):
                raise ApiError(400, "Parameter 'cache_salt' must be a non-empty string if provided.")
        except ApiError as e:
            rec.status = e.status
            self._write_trace(rec)
            return _json(e.body(), e.status, rec.id)
        rec.prompt_tokens = req.prompt_tokens
        if req.tools:
            rec.tool_calls = 0
        fault = self.cfg.faults.draw(rng)
        rec.fault = fault
        if fault in HTTP_FAULTS:
            status, err_type = HTTP_FAULTS[fault]
            err = self.face.error(status, f"Simulated fault ({fault}).", err_type)
            rec.status = status
            self._write_trace(rec)
            return _json(err.body(), status, rec.id)

        out, thinking = self._plan(req, rid)
        fault_at = fault_position(rng, out.target_tokens) if fault else -1
        salt = body.get("cache_salt") if self.face.takes_cache_salt else None
        hashes = (
            prompt_block_hashes(req.prompt_pieces, self.profile.block_size, salt)
            if self.engine.caching
            else ()
        )
        seq = Sequence(rid, req.prompt_tokens, out.target_tokens, hashes, arrival, max_tokens=req.max_tokens)
        seq.tally = self.metrics.counters(model)
        self.engine.add(seq)
        call = _Call(req, out, seq, rec, fault, fault_at, thinking, model)
        try:
            if req.stream:
                return await self._stream(request, call)
            return await self._whole(request, call)
        finally:
            if not seq.done:
                self.engine.abort(seq)
            if rec.end_time is None:  # left early: client gone or server shutting down
                rec.finish_reason = "abort"
                self._write_trace(rec)

    def _plan(self, req: GenRequest, rid: str) -> tuple[Output, bool]:
        """Draw this request's reasoning and answer lengths; `max_tokens` cuts them."""
        p, rng = self.profile, self.rng
        thinking = req.endpoint == "chat" and (p.thinking_default if req.thinking is None else req.thinking)
        calls = None
        if req.tools and req.stream and self.face.speaks_tools:  # (a whole answer: text, as before)
            calls = tool_calls.plan(
                rng,
                req.tools,
                req.tool_choice,
                p.tool_call_rate,
                p.tool_arguments.sample(rng),
                p.tool_calls.sample(rng),
                self.face.tool_id_prefix,
            )
        if calls is not None:  # an answer of tool calls: its argument pieces are its tokens
            total, reasoning = min(calls.tokens, req.max_tokens), 0
            finish = "length" if total < calls.tokens else ("stop" if calls.named else "tool_calls")
        else:
            total, reasoning, finish = p.draw_output(
                rng, req.max_tokens, thinking, req.ignore_eos, req.min_tokens
            )
        out = Output(
            id=rid,
            created=int(time.time()),
            prompt_tokens=req.prompt_tokens,
            target_tokens=total,
            reasoning_tokens=reasoning,
            finish_reason=finish,
            offset=rng.getrandbits(TAPE_BITS),
            tool_plan=calls,
        )
        return out, thinking

    async def _until(self, seq: Sequence, tokens: int) -> None:
        """Wait until the engine has produced `tokens` tokens for `seq` (or dropped it)."""
        loop = asyncio.get_running_loop()
        while seq.generated < tokens and seq.state != ABORTED:
            fut = loop.create_future()
            seq.waiter = fut
            await fut

    async def _stream(self, request: web.Request, call: _Call) -> web.StreamResponse:
        out = call.out
        renderer = self.face.renderer(self.tape, out, call.model, call.req)
        headers = {**self.face.sse_headers, "x-request-id": call.rec.id}
        resp = web.StreamResponse(status=200, headers=headers)
        sink = delivery(resp, call.rec, self.frontend, self.cfg.network_delay_s)
        try:
            await resp.prepare(request)
            await self._stream_body(request, resp, sink, renderer, call)
            await sink.flush()  # a fault's last event, still on its way
        except ConnectionError:  # the client went away: the finally in _generate aborts and traces
            call.rec.finish_reason = "abort"
        finally:
            sink.close()
        return resp

    async def _stream_body(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        sink: Delivery,
        renderer: Renderer,
        call: _Call,
    ) -> None:
        out, seq, rec, fault, fault_at = (
            call.out,
            call.seq,
            call.rec,
            call.fault,
            call.fault_at,
        )
        target = out.target_tokens
        pending = fault is not None
        sent = 0
        parts: list[bytes] = []
        while True:
            if sent == target and not pending:
                break
            if seq.generated <= sent:
                await self._until(seq, sent + 1)
                if seq.state == ABORTED:
                    return
            upto = seq.generated
            if pending and upto > fault_at:
                upto = fault_at
            if sent == 0 and renderer.chat:
                parts.append(renderer.role_chunk())
            renderer.tokens(sent, upto, parts)
            if pending and upto == fault_at and fault == "bad_chunk":
                parts.append(renderer.bad_chunk())
                pending = False
            now = time.time()
            if sent == 0:
                rec.first_token_time = now
                rec.cached_tokens = call.seq.cached_tokens
                rec.scheduled_time = call.seq.scheduled_time
            rec.last_token_time = now
            sent = rec.completion_tokens = upto
            rec.reasoning_tokens = min(sent, out.reasoning_tokens)
            if out.tool_plan is not None:
                rec.tool_calls = out.tool_plan.calls_started(sent)
            if sent == target and not pending:
                break  # finish below, in the same write
            await sink.write(b"".join(parts), len(parts))
            parts = []
            if pending and sent == fault_at:
                pending = False
                if fault == "stall":
                    await asyncio.sleep(self.cfg.faults.stall_s)
                elif fault == "stream_error":
                    self.engine.abort(seq)
                    msg = "Simulated fault (stream_error): the engine failed mid-stream."
                    await sink.write(
                        renderer.error_event(msg) + DONE, 2, before=lambda: self._write_trace(rec)
                    )
                    return
                elif fault == "cut":
                    self.engine.abort(seq)
                    await sink.flush()  # what was sent before the cut arrives first
                    rec.end_time = time.time()
                    self._write_trace(rec)
                    _cut(request)
                    return
        parts.append(renderer.closing(target, seq))
        parts.append(DONE)
        rec.finish_reason = out.finish_reason
        if fault is None:  # (the engine's reason: a tool-call answer stopped, the API says tool_calls)
            engine_finish = "stop" if out.finish_reason == "tool_calls" else out.finish_reason
            self.metrics.observe_success(seq, engine_finish, call.model)
        self._trace_answer(rec, call)
        # the trace line (end_time: now) goes to disk just before the last bytes go out
        await sink.write(b"".join(parts), len(parts), before=lambda: self._write_trace(rec))
        await sink.flush()
        await resp.write_eof()
        if self.face.closes_after_stream and request.transport is not None:
            request.transport.close()  # the face's server does (llama-server): a client must not reuse it

    async def _whole(self, request: web.Request, call: _Call) -> web.StreamResponse:
        req, out, seq, rec, fault, fault_at = (
            call.req,
            call.out,
            call.seq,
            call.rec,
            call.fault,
            call.fault_at,
        )
        if fault in ("stream_error", "cut"):
            await self._until(seq, fault_at)
            self.engine.abort(seq)
            rec.end_time = time.time()
            if fault == "cut":
                rec.status = None  # no status line was ever sent
                self._write_trace(rec)
                _cut(request)
                return web.Response(status=500)  # never sent: the connection is gone
            rec.status = 500
            self._write_trace(rec)
            err = ApiError(
                500,
                "Simulated fault (stream_error): the engine failed mid-generation.",
                "InternalServerError",
            )
            return _json(err.body(), 500, rec.id)
        await self._until(seq, out.target_tokens)
        if seq.state == ABORTED:
            return web.Response(status=500)
        if fault == "stall":
            await asyncio.sleep(self.cfg.faults.stall_s)
        body = self.face.full_body(self.tape, out, call.model, req, seq, call.thinking)
        if fault == "bad_chunk":
            body = body[: len(body) // 2].decode("utf-8", "ignore").encode()  # JSON cut short, UTF-8 intact
        now = time.time()
        rec.first_token_time = rec.last_token_time = rec.end_time = rec.first_write_time = now
        rec.cached_tokens = call.seq.cached_tokens
        rec.scheduled_time = call.seq.scheduled_time
        rec.completion_tokens = out.target_tokens
        rec.reasoning_tokens = out.reasoning_tokens
        rec.finish_reason = out.finish_reason
        if fault is None:
            self.metrics.observe_success(seq, out.finish_reason, call.model)
        self._trace_answer(rec, call)
        self._write_trace(rec)
        return _json(body, 200, rec.id)

    def close(self) -> None:
        self.engine.close()
        if self.trace is not None:
            self.trace.close()


def _json(body: bytes, status: int, rid: str) -> web.Response:
    return web.Response(
        body=body, status=status, headers={"Content-Type": "application/json", "x-request-id": rid}
    )


def _extra_get(answer: Callable[[], tuple[bytes, str]]) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of one of the face's own GET routes (TGI's /info, Ollama's /api/version)."""

    async def handle(request: web.Request) -> web.Response:
        body, content_type = answer()
        return web.Response(body=body, headers={"Content-Type": content_type})

    return handle


def _cut(request: web.Request) -> None:
    """Drop the connection mid-response: no [DONE], no end of the chunked body."""
    transport = request.transport
    if transport is not None:
        transport.abort()


async def serve(
    cfg: SimConfig, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None
) -> None:
    """Run the simulator until `stop` is set (the CLI sets it on SIGTERM/SIGINT)."""
    server = SimServer(cfg)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=2048, reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        server.close()
        raise
    engine_task = asyncio.create_task(server.engine.run(), name="sim-engine")
    stop = stop or asyncio.Event()
    engine_task.add_done_callback(lambda _: stop.set())  # a dead engine must not leave requests hanging
    cfg.port = runner.addresses[0][1]  # the real one when --port 0 asked for any
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        server.engine.close()
        await runner.cleanup()
        engine_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await engine_task  # re-raises if the engine died of an error
        server.close()
