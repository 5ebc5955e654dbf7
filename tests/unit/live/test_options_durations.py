"""--request-timeout and --request-deadline take the one duration syntax (60s, 500ms, 10m; a bare
number is seconds), as Locust's parser, the web UI's form and config files hand them over."""

from __future__ import annotations

import argparse

import pytest

from swarm.core.errors import UsageError
from swarm.core.options import DEFAULT_REQUEST_DEADLINE_S, DEFAULT_REQUEST_TIMEOUT_S
from swarm.live.options import LLMOptions


def opts(**kw) -> LLMOptions:
    return LLMOptions.from_parsed(argparse.Namespace(workload="short_qa", **kw))


@pytest.mark.parametrize(
    ("timeout", "deadline", "seconds"),
    [
        ("500ms", "10m", (0.5, 600.0)),
        ("2", "0", (2.0, 0.0)),
        ("1m30s", "1.5s", (90.0, 1.5)),
        (0.3, 5.0, (0.3, 5.0)),
    ],
)
def test_durations_are_read_in_every_form(timeout, deadline, seconds):
    o = opts(request_timeout=timeout, request_deadline=deadline)
    assert (o.request_timeout, o.request_deadline) == pytest.approx(seconds)


def test_the_defaults_are_the_documented_ones():
    o = opts()
    assert (o.request_timeout, o.request_deadline) == (DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_REQUEST_DEADLINE_S)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"request_timeout": "0s"}, r"--request-timeout must be > 0 seconds"),
        ({"request_timeout": "soon"}, r"^--request-timeout: bad time 'soon'"),
        ({"request_deadline": "-1s"}, r"^--request-deadline: bad time '-1s'"),
    ],
)
def test_bad_durations_are_one_line(kw, match):
    with pytest.raises(UsageError, match=match):
        opts(**kw)
