"""`swarm run`'s time spans; its option checks (one line, exit 2, no traceback) run the command:
tests/integration/test_run_options.py."""

import pytest

from swarm.core.errors import UsageError
from swarm.orchestrate.run import parse_timespan


@pytest.mark.parametrize(
    "text, seconds", [("20", 20), ("20s", 20), ("3m", 180), ("1h20m", 4800), ("1m30s", 90)]
)
def test_timespan(text, seconds):
    assert parse_timespan(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "1.5m", "-3s", "s"])
def test_bad_timespan(text):
    with pytest.raises(UsageError):
        parse_timespan(text)
