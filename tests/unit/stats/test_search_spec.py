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


def test_the_slo_is_parsed_once_and_the_defaults_are_the_option_tables(monkeypatch):
    from swarm.core.options import BY_DEST
    from swarm.core.units import parse_timespan
    from swarm.stats import search_spec, slo

    parsed = []
    real = slo.parse
    monkeypatch.setattr(search_spec.slo, "parse", lambda text, **kw: parsed.append(text) or real(text, **kw))
    s = SearchSpec.parse("concurrency", "ttft_p99<=1s,e2e_p99<=5s", None, None, None, 16)
    assert (
        [o.text for o in s.objectives()]
        == ["ttft_p99<=1s", "e2e_p99<=5s"]
        == [o.text for o in s.objectives()]
    )
    assert parsed == ["ttft_p99<=1s,e2e_p99<=5s"]  # at the parse, not again at each use
    assert s.budget_s == parse_timespan(BY_DEST["search_budget"].default) and s.precision == 0.05
    assert BY_DEST["search_precision"].default == "5%"
