"""Ground-truth trace: one JSON line per request the simulator received (errors too).

Times are `time.time()`, the clock a client on the same machine reads, so a client's own
measurements can be checked against what the server did. Lines are flushed when written: a
request's line is on disk before its last bytes (`[DONE]`) go out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import orjson

SESSION_HEADER = "x-session-id"  # traced as `session`: what a router with session affinity reads


@dataclass(slots=True)
class TraceRecord:
    id: str
    arrival_time: float
    first_token_time: float | None = None  # first token's bytes handed to the socket
    last_token_time: float | None = None  # last token's bytes handed to the socket
    end_time: float | None = None  # response finished (or failed)
    status: int | None = 200  # None: the connection was cut before any status line
    fault: str | None = None
    endpoint: str = ""  # "chat" | "completions"
    stream: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int = 0  # tokens delivered to the client
    reasoning_tokens: int = 0  # of those, reasoning tokens
    finish_reason: str | None = None  # stop | length | abort (client gone) | None (not reached)
    cached_tokens: int | None = None  # prompt tokens the prefix cache held when it was first scheduled
    answer_tokens: int | None = None  # a finished answer's content, pseudo-tokens (what a next turn resends)
    session: str | None = None  # the request's `x-session-id` header (session affinity), if any
    user: str | None = None  # the request body's OpenAI `user` field (the swarm's trace replay: trace-row-N)
    # first bytes actually written to the socket: later than first_token_time by the front-end lane's
    # queue (--frontend-cost) and the network delay (--network-delay), if any
    first_write_time: float | None = None
    scheduled_time: float | None = None  # first scheduled by the engine: the end of its queueing
    tool_calls: int | None = None  # a request with `tools`: the calls its answer started (0: text)


class TraceWriter:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[bytes] | None = open(self.path, "ab")  # noqa: SIM115 - lives as long as the server

    def write(self, rec: TraceRecord) -> None:
        f = self._f
        if f is None:
            return
        f.write(orjson.dumps(asdict(rec)) + b"\n")
        f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
