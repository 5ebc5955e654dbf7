"""Request and output-token totals, client against server, with the cause where they differ."""

from __future__ import annotations

from swarm.analysis.reconcile import reconcile_totals
from tests.unit.analysis.helpers import stats


def test_totals_reconciliation():
    total = {"requests": 1000, "failures": {"timeout": 50}, "output_tokens": 50_000}
    run = stats(-1, requests=948.0, generation_tokens=50_100.0)
    texts = [f.text for f in reconcile_totals(run, total)]
    assert "reconcile" in texts[0] and "reconcile" in texts[1]
    run = stats(-1, requests=1000.0, generation_tokens=60_000.0)
    texts = [f.text for f in reconcile_totals(run, total)]
    assert "marked them failed" in texts[0] and "20.0% more" in texts[1]
    run = stats(-1, requests=900.0, generation_tokens=50_000.0)
    assert "lost data on the server side" in reconcile_totals(run, total)[0].text


def test_the_clients_hang_ups_are_not_the_servers_finished_requests_and_are_set_beside_its_aborts():
    total = {"requests": 1000, "failures": {}, "cancelled_by_client": 300, "output_tokens": 50_000}
    run = stats(-1, requests=700.0, generation_tokens=50_000.0, source="vllm")
    texts = [f.text for f in reconcile_totals(run, total)]
    assert texts[0] == "Requests reconcile: the client recorded 700 OK, the server counted 700 finished."
    assert texts[1].startswith("The client hung up on 300 requests (--cancel, cancelled_by_client); vLLM")
    run = stats(-1, requests=700.0, generation_tokens=50_000.0, source="sglang", aborts=300.0)
    texts = [f.text for f in reconcile_totals(run, total)]
    assert "the server counted 300 aborted requests (the same number)" in texts[1]
    run = stats(-1, requests=700.0, generation_tokens=50_000.0, source="sglang", aborts=290.0)
    assert "(-10)" in reconcile_totals(run, total)[1].text
