"""--input-tokens / --output-tokens DIST: the four forms, their draws, and bad input."""

from __future__ import annotations

import random
import statistics

import pytest

from swarm.core.errors import UsageError
from swarm.load.dists import parse_dist


def draws(text: str, n: int = 4000, seed: int = 1) -> list[int]:
    d = parse_dist(text, "--input-tokens")
    rng = random.Random(seed)
    return [d.draw(rng) for _ in range(n)]


def test_fixed_and_uniform():
    assert set(draws("256", 50)) == {256}
    got = draws("10-20")
    assert min(got) == 10 and max(got) == 20 and len(set(got)) == 11


def test_normal_is_clipped_at_one_and_centred():
    got = draws("100:20")
    assert abs(statistics.mean(got) - 100) < 2 and 17 < statistics.stdev(got) < 23
    assert min(draws("2:50")) == 1  # clipped, never 0 or negative


def test_lognormal_median():
    got = draws("lognormal:300:0.5")
    assert abs(statistics.median(got) - 300) < 15 and min(got) >= 1


def test_same_seed_same_draws():
    assert draws("lognormal:300:0.5", 100, 3) == draws("lognormal:300:0.5", 100, 3)
    assert draws("1-1000", 100, 3) != draws("1-1000", 100, 4)


@pytest.mark.parametrize(
    "text", ["", "0", "-5", "20-10", "0-10", "a", "1:2:3", "lognormal:0:1", "5:-1", "nan:1"]
)
def test_bad_dist_is_a_usage_error_naming_the_flag(text):
    with pytest.raises(UsageError, match="--input-tokens"):
        parse_dist(text, "--input-tokens")


@pytest.mark.parametrize(
    ("text", "a", "b"),
    [("2", 2.0, 0.0), ("500ms", 0.5, 0.0), ("500ms-3s", 0.5, 3.0), ("1.5-4", 1.5, 4.0),
     ("2s:250ms", 2.0, 0.25), ("lognormal:1m:0.5", 60.0, 0.5)],
)  # fmt: skip
def test_a_real_dist_takes_the_one_duration_syntax(text, a, b):
    """--think-time: every value a duration (a bare number is seconds); a lognormal's sigma stays a number."""
    d = parse_dist(text, "--think-time", real=True)
    assert (d.a, d.b) == pytest.approx((a, b))


@pytest.mark.parametrize("text", ["-1s", "3s-1s", "1x", "2s:-1s", "lognormal:0s:1", "inf"])
def test_a_bad_real_dist_is_one_usage_error(text):
    with pytest.raises(UsageError, match=r"--think-time .*durations"):
        parse_dist(text, "--think-time", real=True)
