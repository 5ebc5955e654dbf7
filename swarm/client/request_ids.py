"""The swarm's own `X-Request-Id` per request, so a record can be joined with the server's logs.

`<run>-<process>-<n>`: the run's id (--run-id, "swarm" when the master makes one, which the workers
do not know), a random token per process (workers never collide) and a counter; only characters a
header and a log line take as they are. vLLM takes the header as its request id (the response's
`id` is `chatcmpl-<it>`, `cmpl-<it>`; every version since 0.6) and, started with
--enable-request-id-headers, echoes it in the response's `x-request-id`; the record keeps the id
the server answered with (swarm/client/transport.py), so either way it names what the server's logs
name. Cost: one counter step and one short string per request (benchmarks/request_cost.py).
"""

from __future__ import annotations

import itertools
import re
import secrets

HEADER = b"X-Request-Id: "
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
RUN_CHARS = 40  # the most characters of the run's id kept


class RequestIds:
    """This process's request ids, each once."""

    def __init__(self, run_id: str | None) -> None:
        run = _UNSAFE.sub("_", run_id)[:RUN_CHARS] if run_id else "swarm"
        self.prefix = f"{run}-{secrets.token_hex(4)}-"
        self._n = itertools.count(1)

    def next(self) -> bytes:
        return f"{self.prefix}{next(self._n)}".encode()
