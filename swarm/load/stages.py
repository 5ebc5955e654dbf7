"""Pure parsers for load-stage options (no Locust import: the orchestrator uses them too)."""

from __future__ import annotations

import re

from swarm.core.errors import UsageError

_TIMESPAN = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")


def parse_timespan(text: str) -> int:
    """Locust's time format: 20, 20s, 3m, 1h20m, 3h30m10s. Raises UsageError."""
    text = str(text).strip()
    if text.isdigit():
        return int(text)
    m = _TIMESPAN.match(text)
    if not text or not m or not any(m.groupdict().values()):
        raise UsageError(f"bad time {text!r}: use e.g. 30s, 5m, 1h30m")
    return int(m["h"] or 0) * 3600 + int(m["m"] or 0) * 60 + int(m["s"] or 0)


def parse_sweep(text: str) -> list[int]:
    """`--sweep 10,30,64`: closed-loop user counts."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --sweep {text!r}: give user counts, e.g. 10,30,64,128") from None
    if not levels or any(n < 1 for n in levels):
        raise UsageError(f"bad --sweep {text!r}: every level must be a whole number >= 1, e.g. 10,30,64")
    return levels


def parse_rates(text: str) -> list[float]:
    """`--rate 5,10,20`: open-loop requests per second."""
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --rate {text!r}: give requests per second, e.g. 5,10,20") from None
    if not rates or any(not r > 0 for r in rates):
        raise UsageError(f"bad --rate {text!r}: every rate must be > 0 requests/s, e.g. 5,10,20")
    return rates
