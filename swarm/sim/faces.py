"""The simulator's server faces: what the simulator says as each server family, one registry entry each.

The engine, the faults, the delivery and the trace are the same for every server; a face holds
what differs on the wire (vLLM bench style, like `swarm/client/dialects.py` on the client side):

| face     | request checks, errors              | stream events, bodies | /metrics              | extra routes                              |
|----------|-------------------------------------|-----------------------|-----------------------|-------------------------------------------|
| vllm     | `protocol.py` (FastAPI/vLLM shapes) | `render.py`           | `metrics.py` vllm:    | -                                         |
| llamacpp | `llamacpp.py` (nlohmann/llama.cpp)  | `llamacpp_render.py`  | `llamacpp_metrics.py` | /apply-template (`llamacpp_tokenizer.py`) |
| sglang   | vLLM's; errors top-level objects    | `render.py`           | `sglang_metrics.py`   | -                                         |
| tgi      | `tgi.py`: 422 `{"error": str}`      | `tgi.py`              | `tgi_metrics.py`      | /info, /ping                              |
| trtllm   | `trtllm.py`: extra fields refused   | `render.py`, usage on | `trtllm_metrics.py` at /prometheus/metrics | /metrics: JSON list |
| ollama   | `ollama.py`: OpenAI error object    | `ollama.py`           | none (404)            | / (health), /api/version                  |

Per family, what the wire says (docs/server-families.md has the sources and commits):

| face     | /v1/models `owned_by` | reasoning in              | usage                               | finish                      |
|----------|-----------------------|---------------------------|-------------------------------------|-----------------------------|
| vllm     | `vllm`                | `reasoning` / profile's   | include_usage; continuous per chunk | on the last token's chunk   |
| llamacpp | `llamacpp`            | `reasoning_content`       | include_usage, with timings         | own chunk, `delta: {}`      |
| sglang   | `sglang`              | `reasoning_content`       | as vLLM (continuous_usage_stats)    | on the last token's chunk   |
| tgi      | the model id          | inside `content`          | include_usage only, `"id": ""`      | on the last token's chunk   |
| trtllm   | `tensorrt_llm`        | `reasoning_content`       | on unless include_usage is false    | on the last token's chunk   |
| ollama   | `library`             | `reasoning`               | include_usage only, after finish    | own chunk, `delta: {}`      |

`swarm/sim/server.py` asks the face and never branches on the server. A face is chosen by name
(`swarm sim --server NAME`); another server family is one more `Face` subclass in `FACES`.
Only the per-request objects (the parsed request, the renderer) are built per request: the
token loop runs the renderer's own code, so a face adds no per-token cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

import orjson

from swarm.core.errors import UsageError
from swarm.sim import (
    llamacpp,
    llamacpp_metrics,
    llamacpp_render,
    llamacpp_tokenizer,
    ollama,
    server_info,
    sglang_metrics,
    tgi,
    tgi_metrics,
    trtllm,
    trtllm_metrics,
)
from swarm.sim.engine import Engine
from swarm.sim.engine import Sequence as EngineSequence
from swarm.sim.metrics import SimMetrics
from swarm.sim.profile import Profile
from swarm.sim.protocol import (
    ApiError,
    GenRequest,
    check_model,
    detokenize_answer,
    load_body,
    parse_chat,
    parse_completion,
    tokenize_answer,
)
from swarm.sim.render import Output, PromptDetails, StreamRenderer, Tape, ToolStreamRenderer, full_body


class Renderer(Protocol):
    """One streamed response's SSE events (render.StreamRenderer, llamacpp_render.LlamaStreamRenderer)."""

    chat: bool

    def role_chunk(self) -> bytes: ...
    def tokens(self, start: int, end: int, parts: list[bytes]) -> None: ...
    def closing(self, completion: int, seq: EngineSequence) -> bytes: ...
    def bad_chunk(self) -> bytes: ...
    def error_event(self, message: str, code: int = 500) -> bytes: ...


class FaceMetrics(Protocol):
    """The server's /metrics page, fed by the engine and by each successful request."""

    def counters(self, model: str) -> Any: ...
    def observe_success(self, seq: EngineSequence, finish_reason: str, model: str | None = None) -> None: ...
    def render(self) -> bytes: ...


class Face:
    """What one server family answers; built once per simulator with its served models and profile."""

    name: ClassVar[str]
    fallback_path: ClassVar[str]  # the aiohttp route pattern whose requests `not_found` answers
    sse_headers: ClassVar[dict[str, str]]  # a streamed answer's headers (x-request-id added)
    health: ClassVar[dict[str, str]]  # GET /health: the aiohttp `web.Response` keyword arguments
    id_prefixes: ClassVar[dict[str, str]]  # endpoint -> the response id's prefix
    closes_after_stream: ClassVar[bool]  # closes the connection after a streamed answer
    reasoning_field: ClassVar[str | None]  # the delta field of reasoning unless the profile says
    one_model: ClassVar[str | None]  # why it serves one model only (None: several, LoRA adapters)
    resets_prefix_cache: ClassVar[bool]  # serves POST /reset_prefix_cache (vLLM's, dev mode)
    # the request's X-Request-Id is the response id's base and echoed in x-request-id: vLLM (its
    # `_base_request_id`; the echo with --enable-request-id-headers); the others: not verified, no
    takes_request_id: ClassVar[bool] = False
    speaks_tools: ClassVar[bool] = False  # answers `tools` with streamed tool calls (swarm/sim/tool_calls.py)
    tool_id_prefix: ClassVar[str] = "chatcmpl-tool-"  # a tool call's id before its 32 hex digits
    takes_cache_salt: ClassVar[bool] = (
        False  # mixes a body's `cache_salt` into the prefix-cache hashes (vLLM)
    )
    metrics_path: ClassVar[str | None] = "/metrics"  # where its Prometheus text is (None: nowhere)
    health_paths: ClassVar[tuple[str, ...]] = ("/health",)  # GET paths answered with `health`

    def __init__(self, profile: Profile, served: Sequence[str], prompt_details: PromptDetails | None) -> None:
        self.profile = profile
        self.served = tuple(served)
        self.prompt_details = prompt_details

    def metrics(self, engine: Engine) -> FaceMetrics:
        raise NotImplementedError

    def extra_posts(self) -> dict[str, Callable[[bytes], dict[str, Any]]]:
        """POST routes of this server only: path -> the JSON answer of a body (raises ApiError)."""
        return {}

    def extra_gets(self) -> dict[str, Callable[[], tuple[bytes, str]]]:
        """GET routes of this server only: path -> (the body, its content type); every face states
        its version (and settings) where its family does (swarm/sim/server_info.py)."""
        p = self.profile
        return server_info.routes(self.name, self.served[0], p.max_model_len, p.max_num_seqs)

    def not_found(self, path: str) -> tuple[bytes, int]:
        """The body and status of a request to an unknown path or with an unknown method."""
        raise NotImplementedError

    def models_body(self, created: int) -> bytes:
        raise NotImplementedError

    def tokenize(self, raw: bytes) -> dict[str, Any]:
        raise NotImplementedError

    def detokenize(self, raw: bytes) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        """A generation request: (its JSON body, the served model it gets, the parsed request)."""
        raise NotImplementedError

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        """An injected HTTP fault's error (`err_type`: vLLM's name for it)."""
        raise NotImplementedError

    def renderer(self, tape: Tape, out: Output, model: str, req: GenRequest) -> Renderer:
        raise NotImplementedError

    def full_body(
        self, tape: Tape, out: Output, model: str, req: GenRequest, seq: EngineSequence, thinking: bool
    ) -> bytes:
        """The non-streamed answer."""
        raise NotImplementedError


class VllmFace(Face):
    """vLLM's OpenAI server (FastAPI): swarm/sim/protocol.py, render.py, metrics.py."""

    name = "vllm"
    fallback_path = "/v1/{tail:.*}"  # only unknown /v1 paths and methods: FastAPI's answers
    sse_headers: ClassVar[dict[str, str]] = {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
    }
    health: ClassVar[dict[str, str]] = {}  # 200, empty body
    id_prefixes: ClassVar[dict[str, str]] = {"chat": "chatcmpl-", "completions": "cmpl-"}
    closes_after_stream = False
    reasoning_field = None
    one_model = None
    resets_prefix_cache = True  # vLLM serves it with VLLM_SERVER_DEV_MODE=1: 200, empty body
    takes_cache_salt = True  # vLLM's per-request `cache_salt`: a salted prompt shares no cached block
    takes_request_id = True
    speaks_tools = True

    def metrics(self, engine: Engine) -> FaceMetrics:
        return SimMetrics(engine, self.served)

    def not_found(self, path: str) -> tuple[bytes, int]:
        if path in ("/v1/chat/completions", "/v1/completions", "/v1/models"):
            return b'{"detail":"Method Not Allowed"}', 405
        return b'{"detail":"Not Found"}', 404

    def models_body(self, created: int) -> bytes:
        base = self.served[0]
        body = {
            "object": "list",
            "data": [
                {  # vLLM lists its base model, then each LoRA adapter with the base as its parent
                    "id": model,
                    "object": "model",
                    "created": created,
                    "owned_by": "vllm",
                    "root": model,
                    "parent": None if model == base else base,
                    "max_model_len": self.profile.max_model_len,
                    "permission": [],
                }
                for model in self.served
            ],
        }
        return orjson.dumps(body)

    def tokenize(self, raw: bytes) -> dict[str, Any]:
        body = load_body(raw)
        check_model(body, self.served)
        return tokenize_answer(body, self.profile.max_model_len)

    def detokenize(self, raw: bytes) -> dict[str, Any]:
        body = load_body(raw)
        check_model(body, self.served)
        return detokenize_answer(body)

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        body = load_body(raw)
        model = check_model(body, self.served)
        max_len = self.profile.max_model_len
        req = parse_chat(body, max_len) if endpoint == "chat" else parse_completion(body, max_len)
        return body, model, req

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        return ApiError(status, message, err_type)

    def renderer(self, tape: Tape, out: Output, model: str, req: GenRequest) -> Renderer:
        p = self.profile
        kind = StreamRenderer if out.tool_plan is None else ToolStreamRenderer
        return kind(
            tape,
            out,
            model,
            req.endpoint,
            req.continuous_usage,
            p.merge_reasoning,
            p.reports_reasoning_tokens,
            req.include_usage,
            self.prompt_details,
        )

    def full_body(
        self, tape: Tape, out: Output, model: str, req: GenRequest, seq: EngineSequence, thinking: bool
    ) -> bytes:
        p, details = self.profile, self.prompt_details
        return full_body(
            tape,
            out,
            model,
            req.endpoint,
            p.reasoning_field,
            thinking,
            p.reports_reasoning_tokens,
            None if details is None else details.of(seq, req.endpoint == "chat"),
        )


class LlamaCppFace(Face):
    """llama.cpp's llama-server: swarm/sim/llamacpp.py and its llamacpp_*.py."""

    name = llamacpp.SERVER
    fallback_path = "/{tail:.*}"  # every unknown path and method
    sse_headers = llamacpp.SSE_HEADERS
    health: ClassVar[dict[str, str]] = {"text": '{"status": "ok"}', "content_type": "application/json"}
    id_prefixes: ClassVar[dict[str, str]] = {
        "chat": "chatcmpl-",
        "completions": "chatcmpl-",
    }  # chatcmpl- for both
    # llama-server closes the connection after a streamed answer, though its headers said
    # Keep-Alive (tests/e2e/test_llamacpp_real.py): a client must not reuse it
    closes_after_stream = True
    reasoning_field = "reasoning_content"
    one_model = "llama-server's one model"
    resets_prefix_cache = False  # llama-server has no such endpoint: its 404
    speaks_tools = True  # as llama-server --jinja (swarm/sim/tool_calls.py)
    tool_id_prefix = ""  # its ids: 32 characters, no prefix

    def metrics(self, engine: Engine) -> FaceMetrics:
        return llamacpp_metrics.LlamaMetrics(engine)

    def extra_posts(self) -> dict[str, Callable[[bytes], dict[str, Any]]]:
        return {"/apply-template": _apply_template}

    def not_found(self, path: str) -> tuple[bytes, int]:
        return llamacpp.NOT_FOUND_BODY, 404

    def models_body(self, created: int) -> bytes:
        return orjson.dumps(llamacpp.models_body(self.served[0], self.profile.max_model_len, created))

    def tokenize(self, raw: bytes) -> dict[str, Any]:
        return llamacpp_tokenizer.tokenize_answer(llamacpp.load_body(raw))

    def detokenize(self, raw: bytes) -> dict[str, Any]:
        return llamacpp_tokenizer.detokenize_answer(llamacpp.load_body(raw))

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        body = llamacpp.load_body(raw)  # llama-server answers any model name with its one model
        return body, self.served[0], llamacpp.parse_request(body, endpoint, self.profile.max_model_len)

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        return llamacpp.LlamaError(
            status, message, "server_error" if status >= 500 else "invalid_request_error"
        )

    def renderer(self, tape: Tape, out: Output, model: str, req: GenRequest) -> Renderer:
        if out.tool_plan is not None:
            return llamacpp_render.LlamaToolStreamRenderer(tape, out, model, req.endpoint, req.include_usage)
        return llamacpp_render.LlamaStreamRenderer(tape, out, model, req.endpoint, req.include_usage)

    def full_body(
        self, tape: Tape, out: Output, model: str, req: GenRequest, seq: EngineSequence, thinking: bool
    ) -> bytes:
        return llamacpp_render.full_body(tape, out, model, req.endpoint, seq, thinking)


class TopLevelError(ApiError):
    """SGLang's and TensorRT-LLM's `ErrorResponse`: `{"object": "error", "message", "type", "param",
    "code"}` at the top level, not under `"error"`."""

    def body(self) -> bytes:
        e = {"object": "error", "message": self.message, "type": self.type, "param": self.param}
        return orjson.dumps({**e, "code": self.status})


class SglangFace(VllmFace):
    """SGLang's OpenAI server (FastAPI, vLLM's stream shapes): `sglang:` /metrics
    (swarm/sim/sglang_metrics.py), `owned_by: sglang`, top-level error objects."""

    name = "sglang"
    reasoning_field = "reasoning_content"  # DeltaMessage.reasoning_content (with --reasoning-parser)
    one_model = "SGLang's one model (--served-model-name)"
    resets_prefix_cache = False  # SGLang's is /flush_cache
    takes_cache_salt = False
    takes_request_id = False
    speaks_tools = False  # (its tool-call stream is not taken from its source here: text answers)

    def metrics(self, engine: Engine) -> FaceMetrics:
        return sglang_metrics.SglangMetrics(engine, self.served[0])

    def models_body(self, created: int) -> bytes:
        card = {"id": self.served[0], "object": "model", "created": created, "owned_by": "sglang"}
        return orjson.dumps(
            {
                "object": "list",
                "data": [{**card, "root": self.served[0], "max_model_len": self.profile.max_model_len}],
            }
        )

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        try:
            return super().parse(raw, endpoint)
        except ApiError as e:
            raise TopLevelError(e.status, e.message, e.type, e.param) from None

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        return TopLevelError(status, message, err_type)


class TrtllmFace(SglangFace):
    """`trtllm-serve`: Prometheus at /prometheus/metrics (swarm/sim/trtllm_metrics.py), /metrics the
    JSON iteration stats, `owned_by: tensorrt_llm`, usage on by default, schema errors as text."""

    name = "trtllm"
    one_model = "trtllm-serve's one model"
    metrics_path = trtllm_metrics.PATH

    def metrics(self, engine: Engine) -> FaceMetrics:
        return trtllm_metrics.TrtllmMetrics(engine)

    def extra_gets(self) -> dict[str, Callable[[], tuple[bytes, str]]]:
        # /metrics: the iteration stats queued since the last call, a JSON list; the simulator
        # queues none (as trtllm-serve without enable_iter_perf_stats): its numbers are at PATH
        return {**super().extra_gets(), "/metrics": lambda: (b"[]", "application/json")}

    def models_body(self, created: int) -> bytes:
        card = {"id": self.served[0], "object": "model", "created": created, "owned_by": "tensorrt_llm"}
        return orjson.dumps({"object": "list", "data": [card]})

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        try:
            body, model, req = VllmFace.parse(self, raw, endpoint)
        except ApiError as e:
            if e.type == "Bad Request":  # the request does not fit the schema (pydantic)
                raise trtllm.SchemaError(400, e.message) from None
            raise TopLevelError(e.status, e.message, e.type, e.param) from None
        trtllm.check_fields(body, endpoint)
        trtllm.usage_defaults(body, req)
        return body, model, req


class TgiFace(Face):
    """text-generation-inference's router: swarm/sim/tgi.py and tgi_metrics.py."""

    name = "tgi"
    fallback_path = "/{tail:.*}"
    sse_headers = tgi.SSE_HEADERS
    health: ClassVar[dict[str, str]] = {}  # 200, empty body
    health_paths = ("/health", "/ping")
    id_prefixes: ClassVar[dict[str, str]] = {"chat": "chatcmpl-", "completions": "cmpl-"}  # x-request-id only
    closes_after_stream = False
    reasoning_field = None  # TGI has none: reasoning stays inside content
    one_model = "TGI's one model (--model-id)"
    resets_prefix_cache = False

    def metrics(self, engine: Engine) -> FaceMetrics:
        self._metrics = tgi_metrics.TgiMetrics(engine, self.profile.max_model_len)
        return self._metrics

    def not_found(self, path: str) -> tuple[bytes, int]:
        return b"", 404  # axum's empty 404

    def models_body(self, created: int) -> bytes:
        return orjson.dumps(tgi.models_body(self.served[0]))

    def tokenize(self, raw: bytes) -> dict[str, Any]:
        raise tgi.TgiError(404, "the simulator's TGI face has no /tokenize", "validation")

    detokenize = tokenize

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        try:
            body, model, req = tgi.parse(raw, endpoint, self.served[0], self.profile.max_model_len)
        except tgi.TgiError:
            self._metrics.arrived(None)
            self._metrics.failed("validation")
            raise
        self._metrics.arrived(req.prompt_tokens)
        return body, model, req

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        self._metrics.failed(tgi.failure_kind(status))
        return tgi.error(status, message)

    def renderer(self, tape: Tape, out: Output, model: str, req: GenRequest) -> Renderer:
        return tgi.TgiStreamRenderer(tape, out, model, req.endpoint, req.include_usage)

    def full_body(
        self, tape: Tape, out: Output, model: str, req: GenRequest, seq: EngineSequence, thinking: bool
    ) -> bytes:
        return tgi.full_body(tape, out, model, req.endpoint)


class OllamaFace(Face):
    """Ollama's OpenAI-compatible API: swarm/sim/ollama.py; no /metrics at all."""

    name = "ollama"
    fallback_path = "/{tail:.*}"
    sse_headers = ollama.SSE_HEADERS
    health: ClassVar[dict[str, str]] = {"text": "Ollama is running", "content_type": "text/plain"}
    health_paths = ("/",)
    id_prefixes: ClassVar[dict[str, str]] = {"chat": "chatcmpl-", "completions": "cmpl-"}
    closes_after_stream = False
    reasoning_field = "reasoning"
    one_model = "the simulator's Ollama face serves one model"
    resets_prefix_cache = False
    metrics_path = None  # no Prometheus code in Ollama: /metrics is the 404 of any unknown path

    def metrics(self, engine: Engine) -> FaceMetrics:
        return ollama.NoMetrics()

    def not_found(self, path: str) -> tuple[bytes, int]:
        return ollama.NOT_FOUND, 404

    def models_body(self, created: int) -> bytes:
        return orjson.dumps(ollama.models_body(self.served[0], created))

    def tokenize(self, raw: bytes) -> dict[str, Any]:
        raise ollama.OllamaError(404, "404 page not found")

    detokenize = tokenize

    def parse(self, raw: bytes, endpoint: str) -> tuple[dict[str, Any], str, GenRequest]:
        return ollama.parse(raw, endpoint, self.served[0], self.profile.max_model_len)

    def error(self, status: int, message: str, err_type: str) -> ApiError:
        return ollama.OllamaError(status, message)

    def renderer(self, tape: Tape, out: Output, model: str, req: GenRequest) -> Renderer:
        return ollama.OllamaStreamRenderer(tape, out, model, req.endpoint, req.include_usage, "reasoning")

    def full_body(
        self, tape: Tape, out: Output, model: str, req: GenRequest, seq: EngineSequence, thinking: bool
    ) -> bytes:
        return ollama.full_body(tape, out, model, req.endpoint, out.created)


def _apply_template(raw: bytes) -> dict[str, Any]:
    """llama.cpp's `/apply-template`: the chat prompt as text (its /tokenize counts usage's tokens)."""
    return {"prompt": llamacpp_tokenizer.apply_template(llamacpp.messages_of(llamacpp.load_body(raw)))}


FACES: dict[str, type[Face]] = {
    face.name: face for face in (VllmFace, LlamaCppFace, SglangFace, TgiFace, TrtllmFace, OllamaFace)
}


def get_face(name: str) -> type[Face]:
    try:
        return FACES[name]
    except KeyError:
        raise UsageError(f"unknown server {name!r}; choose one of {', '.join(FACES)}") from None
