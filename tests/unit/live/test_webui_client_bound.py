"""The LLM tab's "Client" column (swarm/live/webui): the client-bound verdict of swarm/stats/cpu.py
(tests/unit/stats/test_cpu.py) as each row shows it. In real Locust processes:
tests/integration/test_client_bound.py."""

from __future__ import annotations

from swarm.core.records import RequestRecord
from swarm.live.webui import CLIENT_BOUND, client_status, rows
from swarm.stats.aggregate import Aggregate


def test_client_column_text():
    assert client_status({}, None) == "-"
    assert client_status({}, 42.4) == "ok (worker CPU <= 42%)"
    plain = client_status({0: ("w1", 97.2)}, 97.2)
    assert plain == f"{CLIENT_BOUND} (w1 97% CPU)"
    staged = client_status({3: ("w1", 95.0), 1: ("w2", 91.0)}, 95.0, multi_stage=True)
    assert staged == f"{CLIENT_BOUND} (stage 2: w2 91% CPU; stage 4: w1 95% CPU)"  # indexes 1, 3
    agg = Aggregate()
    agg.add(RequestRecord("chat", 1.0, ttft_s=0.2, e2e_s=1.0, output_tokens=3))
    assert {r["client"] for r in rows(agg, {}, plain)} == {plain}
    assert {r["client"] for r in rows(agg, {})} == {"-"}
