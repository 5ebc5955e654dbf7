"""swarm/core/urls.py: the URLs the user gives are checked once, with a one-line error naming the option."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.core.urls import check_host, check_url, endpoint_label, split_hosts


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


def test_split_hosts_gives_each_endpoint_once_without_its_trailing_slash():
    assert split_hosts("http://a:8000/") == ("http://a:8000",)
    assert split_hosts("http://a:8000, https://u:p@b:9000/") == ("http://a:8000", "https://u:p@b:9000")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("http://a:1,,http://b:2", "an empty URL in the list"),
        ("http://a:1,", "an empty URL in the list"),
        ("", "an empty URL in the list"),
        ("http://a:1,http://a:1/", "http://a:1 is given twice"),
        ("http://a:1,http://u:p@a:1", "http://a:1 is given twice"),
        ("http://a:1,b:2", "'b:2' is not a URL"),
        ("http://a:1,http://b:2/v1", "without /v1"),
    ],
)
def test_split_hosts_refuses_a_bad_list_in_one_line(value, why):
    with pytest.raises(UsageError) as e:
        split_hosts(value)
    assert why in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("--host ")


@pytest.mark.parametrize(
    ("url", "label"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("https://user:secret@h.example:443/proxy/", "https://h.example:443/proxy"),
        ("http://key@[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_endpoint_label_drops_credentials_and_the_trailing_slash(url, label):
    assert endpoint_label(url) == label
