"""Typed records that flow through the swarm: one `RequestRecord` per request sent.

The path of one number: socket bytes -> SSE event (swarm.client.sse) -> RequestRecord (swarm.live.user)
-> worker aggregate (swarm.stats.aggregate) -> master merge -> Prometheus / web UI / summary.json.
Everything downstream of the user reads these records; nothing reaches back up the chain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """Every request ends in exactly one of these (exhaustive and exclusive)."""

    OK = "ok"
    HTTP_ERROR = "http_error"  # non-2xx status before streaming; server message kept
    STREAM_ERROR = "stream_error"  # `data: {"error": ...}` inside a 200 stream
    TRUNCATED = "truncated"  # stream ended without `data: [DONE]`
    TIMEOUT = "timeout"  # no byte for longer than the per-request timeout
    CONNECT_ERROR = "connect_error"  # could not connect / connection refused or reset before a status
    BAD_CHUNK = "bad_chunk"  # an SSE data line that is not valid JSON or not a chunk
    CANCELLED = "cancelled"  # cut short by the swarm itself (a stop, fewer users): neither ok nor failed
    # the client hung up on purpose (--cancel RATE@WHEN): the load asked for it, neither ok nor failed
    CANCELLED_BY_CLIENT = "cancelled_by_client"

    @property
    def failed(self) -> bool:
        """A failure of the target or the network (counts in the error rate); `cancelled` and
        `cancelled_by_client` are not one."""
        return (
            self is not Outcome.OK
            and self is not Outcome.CANCELLED
            and self is not Outcome.CANCELLED_BY_CLIENT
        )


OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
FAILURES: tuple[Outcome, ...] = tuple(o for o in Outcome if o.failed)
LATENCIES: tuple[str, ...] = ("ttft", "ttfa", "itl", "tpot", "e2e", "send_lag", "ttftc", "task")
"""The latencies measured per request (`<name>_s` fields), aggregated and summarised by these names.
`ttftc`: time to the first tool-call token (agent steps that called a tool); `task`: an agent task's
duration, on its last step's record only (swarm/load/agent.py)."""


@dataclass(slots=True)
class RequestRecord:
    """What the swarm measured for one request. Times in seconds; None = not reached."""

    workload: str
    start_wall_s: float  # time.time() when the request was sent (matches a server trace)
    outcome: Outcome = Outcome.OK
    stage: int = 0  # index of the load stage the request was *sent* in (0 without stages)
    request_id: str | None = None  # the response's `id` / x-request-id header
    http_status: int | None = None
    ttft_s: float | None = None  # first chunk carrying a generated token (reasoning or content)
    ttfa_s: float | None = None  # first chunk carrying an answer (content) token
    e2e_s: float | None = None  # until `data: [DONE]` (or the failure)
    tpot_s: float | None = None  # (e2e - ttft) / (output_tokens - 1)
    itl_s: list[float] = field(default_factory=list)  # gaps between token-carrying chunks (the first 16,384)
    # gaps past the first 16,384 (swarm/client/tally.py ITL_KEEP): only counted, summed and their largest
    # kept (len(itl_s) + itl_dropped = token chunks - 1); None / 0 when none were dropped
    itl_dropped: int = 0
    itl_dropped_sum_s: float | None = None
    itl_dropped_max_s: float | None = None
    prompt_tokens: int | None = None
    # prompt tokens the server served from its prefix / prompt cache (usage.prompt_tokens_details
    # .cached_tokens; llama.cpp always, vLLM with --enable-prompt-tokens-details); None: not reported
    cached_tokens: int | None = None
    output_tokens: int = 0  # reasoning + answer tokens, from server usage when given
    reasoning_tokens: int = 0
    tokens_from_usage: bool = False  # False = counted from chunks (fallback), flagged
    finish_reason: str | None = None
    error: str | None = None  # short reason for a failed outcome (server message, exception)
    send_lag_s: float | None = None  # open loop: how late the request left vs its schedule
    warmup: bool = False  # sent during a stage's warm-up: excluded from that stage's stats
    request_class: str = "direct"  # the request's class: direct / thinking, or a dataset's class column
    model: str = ""  # the served model the request named (--model, its split, or /v1/models); "" = none
    # the endpoint the request went to: its label (swarm/core/urls.py `endpoint_label`, no credentials),
    # set on every record of a run, one endpoint too; "" only for a record made outside a run (tests)
    endpoint: str = ""
    session_id: str | None = None  # chat_session: the conversation this request is a turn of
    turn: int | None = None  # chat_session: the turn's number in its conversation, 1-based
    trace_row: int | None = None  # trace replay: the trace row sent (its 0-based data row in the file)
    # agent (swarm/load/agent.py): the task this request is a step of, and the step's number (1-based)
    task_id: str | None = None
    step: int | None = None
    tool_calls: int | None = None  # calls in the answer (None: the request offered no tools)
    tool_calls_valid: int | None = None  # of those, valid (JSON, known function, required fields)
    tool_error: str | None = None  # the first invalid call's reason, or `none_when_required`
    ttftc_s: float | None = None  # time to the first tool-call token
    tool_s: float | None = None  # the mocked tools' time after this step (in the task, not the request)
    task_s: float | None = (
        None  # the task's duration, on its last step when answered: steps' E2E + tool times
    )

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        return d


NONE_WHEN_REQUIRED = "none_when_required"
"""An agent step's `tool_error` when `--tool-choice required` (or a NAME) got an answer without a call."""


TURN_BUCKETS: tuple[str, ...] = ("1", "2", "3", "4+")
"""Bounded labels of per-turn statistics of conversations (summary, /metrics, report, LLM tab)."""


def turn_bucket(turn: int) -> str:
    """The label of a 1-based conversation turn: "1", "2", "3" or "4+"."""
    return TURN_BUCKETS[turn - 1] if 1 <= turn < 4 else "4+"
