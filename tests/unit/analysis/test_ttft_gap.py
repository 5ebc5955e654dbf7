"""Client vs server TTFT on the same requests along the load: the front-end, the network, the plain
HTTP path, clocks apart."""

from __future__ import annotations

from swarm.analysis.diagnosis import diagnose
from swarm.stats.cpu import ClientLoad
from tests.unit.analysis.helpers import gap_run, kinds_of, ttft_pair


def test_a_gap_growing_with_load_is_the_front_end_and_not_compute():
    r, server, pairs = gap_run([0.002, 0.03, 0.4], share=[0.95, 0.8, 0.5])
    found = diagnose(r, server, ttft_pairs=pairs)
    [f] = [f for f in found if f.kind == "frontend_bound"]
    assert f.stage == 2 and f.trusted and "400 ms at 256 users" in f.text and "--api-server-count" in f.text
    assert not kinds_of(found) & {"compute_bound", "outside_engine", "network_delay", "kv_bound"}
    # the same gap where the worker's CPU was over the bar: the client's, not the server's
    load = ClientLoad.from_lines([{"ts": 0, "worker": "w1", "stage": 2, "cpu_s": 9.7, "wall_s": 10.0}])
    found = diagnose(r, server, ttft_pairs=pairs, cpu=load)
    assert "client_bound" in kinds_of(found)
    assert not kinds_of(found) & {"frontend_bound", "compute_bound", "outside_engine"}


def test_a_gap_that_comes_back_down_at_a_higher_load_is_no_front_end():
    # stop 46's CI: a real vLLM on two cores beside its client, 22 ms at the lowest load and 73 ms
    # (27% of the client's TTFT) at the next; over the bar there alone, it was a stall, not a cap
    r, server, pairs = gap_run([0.022, 0.073, 0.03])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert "frontend_bound" not in kinds_of(found)
    [f] = [f for f in found if f.kind == "client_vs_server" and "engine's" in f.text]
    assert "22 ms to 73 ms" in f.text and "no bottleneck" in f.text
    # the same stall followed by a gap that stays grown: the front-end, named where it began
    r, server, pairs = gap_run([0.022, 0.073, 0.09])
    [f] = [f for f in diagnose(r, server, ttft_pairs=pairs) if f.kind == "frontend_bound"]
    assert f.stage == 1 and "73 ms at 128 users" in f.text
    # grown at the highest load alone: nothing higher says otherwise
    r, server, pairs = gap_run([0.022, 0.03, 0.11])
    [f] = [f for f in diagnose(r, server, ttft_pairs=pairs) if f.kind == "frontend_bound"]
    assert f.stage == 2


def test_a_steady_gap_is_network_delay_and_a_small_one_nothing():
    r, server, pairs = gap_run([0.05, 0.051, 0.052])
    found = diagnose(r, server, ttft_pairs=pairs)
    [f] = [f for f in found if f.kind == "network_delay"]
    assert "50 ms to 52 ms" in f.text and "frontend_bound" not in kinds_of(found)
    r, server, pairs = gap_run([0.001, 0.004, 0.012])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert not kinds_of(found) & {"network_delay", "frontend_bound"}
    [f] = [f for f in found if f.kind == "client_vs_server" and "engine's" in f.text]
    assert "1 ms to 12 ms" in f.text and "no bottleneck" in f.text
    # the demo's case: the engine held its users at the plateau: compute (no cap, no KV)
    assert "compute_bound" in kinds_of(found)
    # a real vLLM on two cores beside its client (tests/e2e/test_vllm_real.py's sweep): its API
    # process 20 ms behind its engine at the lowest load, 35 ms at the highest: a gap over the bar
    # that moves with the load is no fixed latency, and under the front-end's 50 ms no bottleneck
    r, server, pairs = gap_run([0.02, 0.028, 0.035])
    found = diagnose(r, server, ttft_pairs=pairs)
    assert not kinds_of(found) & {"network_delay", "frontend_bound"}
    [f] = [f for f in found if f.kind == "client_vs_server" and "engine's" in f.text]
    assert "20 ms to 35 ms" in f.text and "no bottleneck" in f.text
    r, server, pairs = gap_run([0.1, 0.12, 0.149])  # 100 ms injected, within half again: the network
    assert "network_delay" in kinds_of(diagnose(r, server, ttft_pairs=pairs))


def test_client_below_server_is_no_measurement():
    r, server, pairs = gap_run([-0.02, -0.02, -0.02])
    found = [f for f in diagnose(r, server, ttft_pairs=pairs) if f.kind == "client_vs_server"]
    assert not found[0].trusted and "clocks" in found[0].text


def test_same_requests_and_bucket_widths():
    engine = [0.3 + 0.01 * i for i in range(100)]  # 300-1290 ms: buckets 0.25-0.5 ... 1.0-2.5
    p = ttft_pair(0, [e + 0.003 for e in engine], engine)
    assert p.same_requests and abs(p.mean_gap - 0.003) < 1e-9
    assert p.server.buckets["p99"] == (1.0, 2.5) and p.width("p99") == 1.5
    # the client's exact p99 sits in the server's bucket: the interpolated gap is within its width
    assert -p.width("p99") <= p.gap("p99") <= p.width("p99")
    assert not ttft_pair(0, engine[:50], engine).same_requests  # half the requests: not comparable
