"""swarm/core/urls.py: the URLs the user gives are checked once, with a one-line error naming the option."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.core.urls import check_host, check_url


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "https://example.com", "http://[::1]:9400/metrics"])
def test_usable_urls_come_back_unchanged(url):
    assert check_url(url, "--server-metrics") == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (None, "is not a URL: use e.g."),
        ("127.0.0.1:8000", "is not a URL: use e.g."),
        ("ftp://h:21", "is not a URL: use e.g."),
        ("http://[::1", "is not a URL ("),
        ("http://h:99999", "is not a URL ("),
        ("http://h:0", "(port 0)"),
    ],
)
def test_unusable_urls_are_a_usage_error_naming_the_option(url, why):
    with pytest.raises(UsageError) as e:
        check_url(url, "--gpu-metrics")
    assert str(e.value).startswith(f"--gpu-metrics {url!r}") and why in str(e.value)


def test_a_target_url_ending_in_v1_is_refused_with_the_base_url_to_give():
    assert check_host("http://h:8000/") == "http://h:8000/"
    with pytest.raises(UsageError, match=r"without /v1, e\.g\. http://h:8000$"):
        check_host("http://h:8000/v1/")
