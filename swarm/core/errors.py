"""The swarm's exception tree, how each failure of a request maps to its outcome, and exit codes.

    SwarmError
    ├── UsageError       bad input (option, file, knob): one line, exit 2
    ├── TargetError      the target is unreachable or unusable: one line, exit 1
    └── RequestFailure   one request failed; `outcome` says how (swarm/core/records.py Outcome)
        ├── BadChunk         an SSE payload that is not a completion chunk -> bad_chunk
        │   └── EventTooLarge    an SSE event past the size limit, never buffered -> bad_chunk
        └── LLMRequestFailure    what Locust's `request` event gets for a failed request

The mapping from the transport's own exceptions (timeouts, resets, parse errors) to outcomes
lives in one function, swarm/client/transport.py `failure`; exit codes in `exit_code` here.
"""

from __future__ import annotations

from swarm.core.records import Outcome
from swarm.core.terminal import printable

EXIT_OK = 0
EXIT_FAILED = 1  # an SLO failed, the target could not be reached, a search did not converge
EXIT_USAGE = 2  # bad input: one line on stderr, nothing started
EXIT_ABORTED = 3  # --abort-on: a circuit-breaker condition held and ended the run early
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM


class SwarmError(Exception):
    """Base class for errors the swarm raises on purpose."""


class UsageError(SwarmError):
    """Bad input from the user (CLI option, workload knob, file). Message says what and how to fix."""


class TargetError(SwarmError):
    """The target server is unreachable or answers in a way the swarm cannot use."""


class RequestFailure(SwarmError):
    """One request failed; `outcome` is how it is recorded."""

    outcome: Outcome = Outcome.BAD_CHUNK

    def __init__(self, message: str, outcome: Outcome | None = None) -> None:
        super().__init__(message)
        if outcome is not None:
            self.outcome = outcome


class BadChunk(RequestFailure):
    """An SSE data payload that is not a completion chunk (or an error object)."""

    outcome = Outcome.BAD_CHUNK


class EventTooLarge(BadChunk):
    """An SSE event longer than the parser's limit: the request ends as bad_chunk, unbuffered."""


class ClientHangUp(RequestFailure):
    """The client closed the stream on purpose (`--cancel`): recorded as `cancelled_by_client`."""

    outcome = Outcome.CANCELLED_BY_CLIENT


class LLMRequestFailure(RequestFailure):
    """The exception handed to Locust for a failed request: `str` and `repr` are "outcome: message"."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(f"{outcome.value}: {message}", outcome)

    def __repr__(self) -> str:  # Locust's failure table groups and shows failures by repr
        return str(self)


def exit_code(exc: BaseException) -> int:
    """The process exit code for an exception that ends a command."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def one_line(prog: str, exc: BaseException) -> str:
    """What a command prints on stderr for `exc`: "prog: error: ..." for bad input, "prog: ..." else.
    Control characters are written out (swarm/core/terminal.py): messages may quote a target."""
    if isinstance(exc, UsageError):
        return f"{prog}: error: {printable(str(exc), lines=True)}"
    if isinstance(exc, KeyboardInterrupt):
        return f"{prog}: interrupted"
    return f"{prog}: {printable(str(exc), lines=True)}"
