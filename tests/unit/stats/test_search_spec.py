"""`--search` and its options checked (swarm/stats/search_spec.py)."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.stats.search_spec import SearchSpec


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fast", "ttft_p99<=1s", None, None, None, 16), "bad --search"),
        (("concurrency", None, None, None, None, 16), "needs a criterion"),
        (("knee", "ttft_p99<=1s", None, None, None, 16), "takes no --slo"),
        (("concurrency", "ttft_p99<=1s", None, "60%", None, 16), "below 50%"),
        (("concurrency", "ttft_p99<=1s", None, "x", None, 16), "bad --search-precision"),
        (("concurrency", "ttft_p99<=1s", None, None, "0s", 16), "--search-budget"),
        (("concurrency", None, "95%", None, None, 16), "needs --goodput"),
        (("concurrency", None, "120%", None, None, 16), "at most 100%"),
        (("concurrency", "ttft_p99<=x", None, None, None, 16), "bad SLO"),
    ],
)
def test_bad_input(args, message):
    with pytest.raises(UsageError, match=message):
        SearchSpec.parse(*args)


def test_goodput_criterion_parses():
    s = SearchSpec.parse("concurrency", None, "95%", "10%", "2m", 8, "ttft<=800ms")
    assert s.goodput_min == 0.95 and s.precision == 0.10 and s.budget_s == 120 and s.slo_text is None
