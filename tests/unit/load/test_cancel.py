"""swarm/load/cancel.py: `--cancel RATE[@WHEN]` parsed (bad input one UsageError line), and the draw:
the same seed cuts the same requests, another seed others, and the share cut is the rate's."""

from __future__ import annotations

import math

import pytest

from swarm.core.errors import UsageError
from swarm.load.cancel import CancelDraw, CancelSpec, parse_cancel


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("20%@first-token", CancelSpec(0.2, after_tokens=1)),
        ("20%", CancelSpec(0.2, after_tokens=1)),  # WHEN defaults to first-token
        ("5%@2s", CancelSpec(0.05, after_s=2.0)),
        ("5% @ 500ms", CancelSpec(0.05, after_s=0.5)),
        ("10%@tokens:16", CancelSpec(0.1, after_tokens=16)),
        ("0.3@1.5", CancelSpec(0.3, after_s=1.5)),  # a fraction, a bare number of seconds
        ("100%@first-token", CancelSpec(1.0, after_tokens=1)),
    ],
)
def test_parse(text, spec):
    assert parse_cancel(text) == spec


@pytest.mark.parametrize("text", [None, "", "  "])
def test_unset_is_none(text):
    assert parse_cancel(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("120%", "at most 100%"),
        ("0%", "above 0%"),
        ("-5%", "above 0%"),
        ("1.5", "at most 100%"),
        ("abc", "give a share"),
        ("20%@never", "WHEN must be a duration after sending, first-token or tokens:N"),
        ("20%@tokens:0", "N of at least 1"),
        ("20%@tokens:x", "WHEN must be"),
        ("20%@0s", "above 0"),
    ],
)
def test_bad_input_is_one_usage_line(text, says):
    with pytest.raises(UsageError) as e:
        parse_cancel(text)
    assert says in str(e.value) and "\n" not in str(e.value) and "--cancel " in str(e.value)


def test_when_as_the_output_says_it():
    assert parse_cancel("20%").describe() == "20% of requests cancelled by the client at the first token"
    assert parse_cancel("5%@2s").when == "2s after sending"
    assert parse_cancel("5%@tokens:16").when == "after 16 tokens"


def _cuts(seed, worker=0, user=0, n=2000, share=0.3):
    d = CancelDraw(share, seed, worker, user)
    return [d.next() for _ in range(n)]


def test_the_same_seed_cuts_the_same_requests_and_another_seed_others():
    assert _cuts(7) == _cuts(7)
    assert _cuts(7, worker=1, user=2) == _cuts(7, worker=1, user=2)
    assert _cuts(7) != _cuts(8)
    assert _cuts(7, user=0) != _cuts(7, user=1)  # each user its own stream
    assert _cuts(7, worker=0) != _cuts(7, worker=1)


@pytest.mark.parametrize("share", [0.05, 0.3, 0.9])
def test_the_share_cut_is_within_binomial_bounds(share):
    n = 20_000
    for seed in range(5):
        k = sum(_cuts(seed, n=n, share=share))
        sd = math.sqrt(n * share * (1 - share))
        assert abs(k - n * share) < 4.5 * sd, (seed, k)


def test_all_and_an_unseeded_draw():
    assert all(_cuts(3, share=1.0, n=500))
    unseeded = CancelDraw(0.5, None, 0, 0)
    assert 100 < sum(unseeded.next() for _ in range(1000)) < 900
