"""Several endpoints in one run, request side (issue 29): plain `locust -f locustfiles/short_qa.py
--host URL1,URL2 --balance round-robin` against two simulators. Every record names its endpoint,
each endpoint's count equals that simulator's own vllm:request_success_total exactly, the split is
even, and summary.json has a block per endpoint adding up to the total. (`swarm run`'s side, an
endpoint killed half-way and real servers: tests/e2e and the other endpoint tests.)"""

from __future__ import annotations

import json

import pytest

from swarm.core.recordfile import read_records
from tests.helpers.locust_run import run_locust
from tests.helpers.sim_http import scrape
from tests.helpers.support import REPO, sim_server


def _served(url: str) -> float:
    return sum(v for (name, _), v in scrape(url).items() if name == "vllm:request_success_total")


@pytest.mark.integration
def test_round_robin_over_two_simulators_reconciles_per_endpoint(tmp_path):
    out = tmp_path / "out"
    with (
        sim_server(tmp_path, "--profile", "instant", trace=False) as a,
        sim_server(tmp_path, "--profile", "instant", trace=False) as b,
    ):
        host = f"{a.url}/,{b.url}"  # a trailing '/' is dropped from the label
        p, _, counts = run_locust(tmp_path, host, "--balance", "round-robin", "--swarm-out", str(out),
                                  "--max-tokens", "4", users=4, run_time="4s",
                                  locustfile=REPO / "locustfiles" / "short_qa.py")  # fmt: skip
        served = {a.url: _served(a.url), b.url: _served(b.url)}
    assert p.returncode == 0, p.stderr[-2000:]
    records = read_records(out / "records")
    assert len(records) == counts["requests"] > 100
    assert all(r.outcome.value == "ok" for r in records)
    per = {e: sum(r.endpoint == e for r in records) for e in (a.url, b.url)}
    assert sum(per.values()) == len(records)  # every record names one of the two
    assert per == served  # exactly what each simulator says it served
    assert abs(per[a.url] - per[b.url]) <= 4, per  # round-robin per process: within the users in flight
    summary = json.loads((out / "summary.json").read_text())
    assert {e: blk["requests"] for e, blk in summary["endpoints"].items()} == per
    assert (
        sum(blk["output_tokens"] for blk in summary["endpoints"].values())
        == summary["total"]["output_tokens"]
    )
