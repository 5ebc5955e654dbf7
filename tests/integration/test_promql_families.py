"""The "LLM server (every family)" dashboard against a real Prometheus scraping the simulator's
SGLang, TGI and TensorRT-LLM faces (`swarm sim --server sglang|tgi|trtllm`), through the repo's own
dashboards/prometheus/prometheus.yml (its `sglang`, `tgi` and `trtllm` jobs, TensorRT-LLM's at
/prometheus/metrics). vLLM and llama.cpp are checked by test_promql.py, which runs every panel of
every dashboard, this one included, against those two faces.

Each panel joins one expression per family (`dashboards.by_family`): every query must answer with
exactly the families that have the figure (docs/server-families.md), no more (a family that lacks
it is absent, never 0) and no fewer. One Prometheus and three simulators, started together, for
the module; a trickle of repeated prompts keeps the counters moving and the prefix cache hit.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from swarm.grafana import dashboards
from tests.helpers.sim_http import HELLO, trickle
from tests.helpers.support import free_port, sim_server
from tests.integration.test_promql import Prometheus, local_config, start_prometheus, substitute

pytestmark = [pytest.mark.serial, pytest.mark.integration]

FACES = {"sglang": ("sglang", "sglang:30000"), "tgi": ("tgi", "tgi:80"), "trtllm": ("trtllm", "trtllm:8000")}
ALL = {"sglang", "tgi", "trtllm"}
EXPECTED = {  # panel title -> the families (of these three) that have the figure
    "Running requests": ALL,
    "Waiting requests": ALL,
    "KV cache usage": {"sglang", "trtllm", "tgi (batch token budget)"},
    "Prompt tokens/s": ALL,
    "Generated tokens/s": ALL,
    "Prefix cache hit rate": {"sglang", "trtllm"},
    "Preemptions / retractions per second": {"sglang"},
    "Finished requests per second": ALL,
    "TTFT p99": {"sglang", "trtllm"},
    "Inter-token latency p99": {"sglang", "trtllm"},
    "E2E p99": ALL,
    "Queue time p99": ALL,
}
MODEL = dashboards.build_all()["llm-server.json"]


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    tmp = tmp_path_factory.mktemp("promql-families")
    prom_port = free_port()
    with contextlib.ExitStack() as stack:
        sims = {
            fam: stack.enter_context(
                sim_server(
                    tmp, "--server", server, "--profile", "instant", "--max-num-seqs", "2", trace=False
                )
            )
            for fam, (server, _) in FACES.items()
        }
        targets = {(fam, slot): sims[fam].url.removeprefix("http://") for fam, (_, slot) in FACES.items()}
        p = stack.enter_context(
            start_prometheus(tmp, local_config(targets, f"127.0.0.1:{prom_port}"), prom_port)
        )
        stack.enter_context(
            trickle(
                [s.url for s in sims.values()], {"model": "sim-model", "messages": HELLO, "max_tokens": 8}
            )
        )
        deadline = time.monotonic() + 30
        query = substitute(dashboards.by_family(dashboards.GENERATION_TOKENS), {"instance": ".*"}, 60)
        while families(p, query, positive=True) != ALL:
            assert time.monotonic() < deadline, f"no token rates from {ALL}: {p.query(query)}"
            time.sleep(1)
        yield p


def families(prom: Prometheus, query: str, positive: bool = False) -> set[str]:
    answer = prom.query(query)
    assert answer.get("status") == "success", (query, answer)
    return {
        r["metric"]["family"] for r in answer["data"]["result"] if not positive or float(r["value"][1]) > 0
    }


def test_every_panel_answers_with_the_families_that_have_its_figure(prom: Prometheus) -> None:
    assert set(prom.targets_up().values()) == {1.0}, prom.targets_up()
    queries = list(dashboards.panel_queries(MODEL))
    assert {title for title, _, _ in queries} == set(EXPECTED)
    wrong = []
    for title, ref, expr in queries:
        got = families(prom, substitute(expr, {"instance": ".*"}, 60))
        if got != EXPECTED[title]:
            wrong.append(f"{title} / {ref}: {sorted(got)}, expected {sorted(EXPECTED[title])}")
    assert not wrong, "\n".join(wrong)


def test_the_values_are_the_faces_own(prom: Prometheus) -> None:
    """Shares between 0 and 1, positive rates and latencies, the running batch within the cap."""
    for table in (dashboards.KV_USAGE, dashboards.PREFIX_HITS):
        for r in prom.query(substitute(dashboards.by_family(table), {"instance": ".*"}, 60))["data"][
            "result"
        ]:
            assert 0.0 <= float(r["value"][1]) <= 1.0, r
    for r in prom.query(substitute(dashboards.by_family(dashboards.RUNNING), {"instance": ".*"}, 60))["data"][
        "result"
    ]:
        assert 0.0 <= float(r["value"][1]) <= 2.0, r  # --max-num-seqs 2
    p99 = dashboards.latency(0.99, dashboards.E2E)
    for r in prom.query(substitute(p99, {"instance": ".*"}, 60))["data"]["result"]:
        assert float(r["value"][1]) > 0, r
    # the instance variable lists every face
    values = prom.get(
        "/api/v1/label/instance/values", **{"match[]": f'up{{job=~"{dashboards.FAMILY_JOBS}"}}'}
    )["data"]
    assert len(values) == len(FACES), values
