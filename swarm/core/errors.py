"""The swarm's exception tree. CLI entry points turn `UsageError` into one line + exit 2."""


class SwarmError(Exception):
    """Base class for errors the swarm raises on purpose."""


class UsageError(SwarmError):
    """Bad input from the user (CLI option, workload knob, file). Message says what and how to fix."""


class TargetError(SwarmError):
    """The target server is unreachable or answers in a way the swarm cannot use."""
