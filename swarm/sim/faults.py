"""Injected faults: which one (if any) a request gets, and what each looks like on the wire.

Each kind has a rate (`--fault KIND=RATE`, repeatable); one uniform draw per request picks at
most one kind, so the rates must add up to at most 1.

- http_400/429/500/503: answered up front with vLLM's error JSON and that status.
- stream_error: after some tokens, `data: {"error": {...,"code": 500}}` then `data: [DONE]`.
- cut: after some tokens the connection is closed without `[DONE]`.
- stall: after some tokens, nothing is written for `--stall` (e.g. 5s); then the stream goes on.
- bad_chunk: one extra event whose JSON is cut short, between two token chunks (no token lost).

Without streaming, stream_error answers HTTP 500, cut closes the connection without a response,
stall delays the response, and bad_chunk sends a truncated JSON body with HTTP 200.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from swarm.core.errors import UsageError

HTTP_FAULTS = {
    "http_400": (400, "BadRequestError"),
    "http_429": (429, "RateLimitError"),
    "http_500": (500, "InternalServerError"),
    "http_503": (503, "ServiceUnavailableError"),
}
STREAM_FAULTS = ("stream_error", "cut", "stall", "bad_chunk")
FAULT_KINDS = (*HTTP_FAULTS, *STREAM_FAULTS)


def parse_fault(spec: str) -> tuple[str, float]:
    """`KIND=RATE` -> (kind, rate), or UsageError saying what to write instead."""
    kind, sep, rate_s = spec.partition("=")
    kind = kind.strip()
    if not sep or kind not in FAULT_KINDS:
        raise UsageError(f"--fault {spec!r}: expected KIND=RATE with KIND one of {', '.join(FAULT_KINDS)}")
    try:
        rate = float(rate_s)
    except ValueError:
        raise UsageError(f"--fault {spec!r}: RATE must be a number in [0, 1], e.g. {kind}=0.05") from None
    if not 0.0 <= rate <= 1.0:
        raise UsageError(f"--fault {spec!r}: RATE must be in [0, 1]")
    return kind, rate


@dataclass(frozen=True)
class FaultPlan:
    rates: dict[str, float] = field(default_factory=dict)
    stall_s: float = 5.0

    @classmethod
    def from_specs(cls, specs: list[str] | None, stall_s: float) -> FaultPlan:
        rates: dict[str, float] = {}
        for spec in specs or []:
            kind, rate = parse_fault(spec)
            rates[kind] = rates.get(kind, 0.0) + rate
        if sum(rates.values()) > 1.0 + 1e-9:
            raise UsageError(
                f"--fault rates add up to {sum(rates.values()):.3f}; they must add up to at most 1"
            )
        if not 0 <= stall_s < float("inf"):  # nan too: a stall must end
            raise UsageError(f"--stall must be >= 0 and finite (got {stall_s})")
        return cls({k: v for k, v in rates.items() if v > 0}, stall_s)

    def draw(self, rng: random.Random) -> str | None:
        """The fault for one request, or None. Always one draw, so seeded runs stay aligned."""
        r = rng.random()
        for kind, rate in self.rates.items():
            r -= rate
            if r < 0:
                return kind
        return None


def fault_position(rng: random.Random, tokens: int) -> int:
    """How many tokens go out before a mid-stream fault: at least 1, fewer than all when possible."""
    if tokens <= 2:
        return 1
    return rng.randint(1, tokens - 1)
