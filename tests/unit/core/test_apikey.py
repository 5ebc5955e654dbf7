"""The API key's origin rule and its scrub (swarm/core/apikey.py)."""

from __future__ import annotations

import pytest

from swarm.core.apikey import SCRUB_MIN_RUN, key_for, origin, scrub

KEY = "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("HTTP://User:pw@Example.COM/v1/", "http://example.com:80"),  # case, credentials, path, port
        ("https://example.com", "https://example.com:443"),
        ("https://[::1]:8443/x", "https://[::1]:8443"),
        ("http://[::1", None),
        ("http://a:99999", None),
        ("ftp://a", None),
        ("127.0.0.1:8000", None),
        ("", None),
        (None, None),
    ],
)
def test_origin(url, expected):
    assert origin(url) == expected


def test_the_key_goes_to_its_origin_only():
    bound = origin("http://gpu-host:8000")
    assert key_for(KEY, bound, "http://gpu-host:8000/v1") == KEY
    assert key_for(KEY, bound, "http://GPU-HOST:8000") == KEY
    for other in ("http://gpu-host:8001", "https://gpu-host:8000", "http://attacker:8000", "http://gpu-host"):
        assert key_for(KEY, bound, other) is None, other
    assert key_for(KEY, None, "http://gpu-host:8000") is None  # no origin: sent to no one
    assert key_for(None, bound, "http://gpu-host:8000") is None


def test_scrub_in_any_case_and_any_run_of_8():
    text = f"refused {KEY.upper()}; key {KEY[:10]}...; tail {KEY[-8:]}; middle x{KEY[5:17]}x"
    assert scrub(text, KEY) == "refused ***; key ***...; tail ***; middle x***x"
    assert scrub(f"Bearer {KEY}", KEY) == "Bearer ***"
    assert scrub(f"{KEY.lower()}{KEY}", KEY) == "***"  # adjacent runs: one mask


def test_scrub_leaves_runs_shorter_than_8():
    assert SCRUB_MIN_RUN == 8
    short = KEY[3:10]  # 7 characters of the key
    assert scrub(f"got {short} and sk- and {KEY[:7]}", KEY) == f"got {short} and sk- and {KEY[:7]}"
    assert scrub("", KEY) == "" and scrub("abc", None) == "abc"


def test_scrub_a_short_key_only_whole():
    assert scrub("abcABCab abc", "aBc") == "***ab ***"  # (adjacent: one mask)


def test_scrub_keeps_non_ascii_text_aligned():
    assert scrub(f"İ错误 {KEY.upper()} é", KEY) == "İ错误 *** é"
