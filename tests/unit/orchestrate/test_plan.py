"""`swarm run`'s plan (swarm/orchestrate/plan.py): every check is one UsageError before anything
starts, and the plan says how long the load lasts and what it is. (Running the command with bad
options, one line and exit 2: tests/integration/test_run_options.py, test_bad_input.py.)"""

from __future__ import annotations

import argparse
import socket

import pytest

from swarm.core.errors import UsageError
from swarm.orchestrate import plan as planmod
from swarm.orchestrate.plan import describe_load, plan_from_args
from swarm.orchestrate.run import configure, run_options


def make(*argv: str):
    p = argparse.ArgumentParser()
    configure(p)
    return plan_from_args(p.parse_args(["--run-id", "r1", *argv]), run_options())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--workers", "0"], "--workers must be at least 1 (got 0)"),
        (["--workers", "100000"], "--workers 100000: at most"),
        (["--repeat", "0"], "--repeat must be at least 1 (got 0)"),
        (["-u", "0"], "-u/--users must be at least 1 (got 0)"),
        (["-r", "nan"], "-r/--spawn-rate must be > 0 and finite (got nan)"),
        (["-t", "0s"], "-t/--run-time must be > 0, e.g. 30s"),
        (["-u", "99999999999"], "-u/--users 99999999999: each user holds a connection open"),
        (["--gpu-metrics", "http://a:9400/metrics,nope"], "--gpu-metrics"),
        (["--", "--master-host", "x"], "--master-host after --: swarm run sets it itself"),
        (["--", "--workers", "3"], "--workers after --: it is a swarm run option, give it before --"),
        (["--max-tokens", "8", "--", "--max-tokens=9"], "--max-tokens is given both before and after --"),
        (["--workload", "no_such_workload"], "no_such_workload"),
        (["--slo", "nowl.ttft_p99<=1s"], "no workload 'nowl' in this run (mixed)"),
        (["--workload", "chat,rag", "--slo", "short_qa.e2e_p99<=1s"], "in this run (chat, rag)"),
        (["--sim-arg=--no-such-option"], "--sim-arg: unknown simulator option '--no-such-option'"),
        (["--prometheus-port", "70000"], "--prometheus-port must be 1-65535 (got 70000)"),
        (["--search", "concurrency", "--sweep", "2,4", "--slo", "ttft_p99<=1s"], "leave out --sweep"),
    ],
)
def test_a_bad_option_is_one_line(argv, message):
    with pytest.raises(UsageError) as e:
        make(*argv)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_busy_prometheus_port_is_refused_up_front():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"--prometheus-port {port}: cannot listen there"):
            make("--prometheus-port", str(port))


def test_the_users_fit_the_workers_open_files(monkeypatch):
    monkeypatch.setattr(planmod, "worker_open_files", lambda: 100)
    make("-u", "200", "--workers", "2")
    with pytest.raises(UsageError, match="give at most 200 users"):
        make("-u", "201", "--workers", "2")


def test_the_plan_from_the_defaults():
    p = make()
    assert (p.hosts, p.workers, p.users, p.spawn_rate, p.run_time_s) == ((), 2, 16, 16.0, 30)
    assert str(p.out) == "runs/r1" and p.run_id == "r1" and p.extra == []
    assert p.expected_s == 30 and describe_load(p) == "16 users"


def test_how_long_the_load_lasts_and_what_it_is():
    sweep = make("--sweep", "2,4,8", "--stage-time", "5s")
    assert sweep.expected_s == 15 and describe_load(sweep) == "stages 2,4,8 users x 5s"
    rate = make("--rate", "1,2.5", "--arrivals", "constant", "-u", "4")
    assert rate.expected_s == 60
    assert describe_load(rate) == "open loop 1,2.5 req/s (constant) x 30s, at most 4 in flight"
    search = make("--search", "concurrency", "--slo", "ttft_p99<=800ms", "--search-budget", "90s")
    assert search.expected_s == 90 and describe_load(search) == "search concurrency (budget 90s)"


def test_the_host_loses_its_trailing_slash():
    assert make("--host", "http://127.0.0.1:8000/").hosts == ("http://127.0.0.1:8000",)


def test_several_endpoints_each_checked_in_order():
    p = make("--host", "http://a:8001/,http://b:8002")
    assert p.hosts == ("http://a:8001", "http://b:8002")


@pytest.mark.parametrize(
    "host, message",
    [
        ("http://a:8001,,http://b:8002", "an empty URL in the list"),
        ("http://a:8001,http://a:8001/", "http://a:8001 is given twice"),
        ("http://a:8001,b:8002", "'b:8002' is not a URL"),
        ("http://a:8001,http://b:8002/v1", "without /v1"),
    ],
)
def test_a_bad_endpoint_in_the_list_is_one_line(host, message):
    with pytest.raises(UsageError, match=message):
        make("--host", host)


def test_server_metrics_is_refused_with_several_endpoints():
    with pytest.raises(UsageError, match="each is scraped at its own /metrics"):
        make("--host", "http://a:8001,http://b:8002", "--server-metrics", "http://a:8001/metrics")


def test_stage_time_and_warmup_are_read_where_stages_or_a_search_use_them():
    """Parsed once, here (StagePlan takes the seconds), for the stages and the search alike."""
    with pytest.raises(UsageError, match=r"^--stage-time: bad time 'soon'"):
        make("--sweep", "2", "--stage-time", "soon")
    with pytest.raises(UsageError, match=r"^--warmup: bad time 'soon'"):
        make("--search", "concurrency", "--slo", "ttft_p99<=1s", "--warmup", "soon")
    sweep = make("--sweep", "2", "--stage-time", "1m", "--warmup", "10s")
    assert (sweep.stage_time_s, sweep.warmup_s) == (60, 10)
    with pytest.raises(UsageError, match=r"^--stage-time: bad time 'bogus'"):
        make("-t", "5s", "--stage-time", "bogus")  # no stages: refused all the same, not ignored
    assert make("-t", "5s", "--stage-time", "1m").stage_time_s == 0  # (no stages: none is handed on)


def test_a_rate_search_starts_at_the_first_rate_parsed():
    """--rate read once, by StagePlan: an empty first item is skipped there, as by the master (it was
    read again, and float('') was a traceback)."""
    p = make("--search", "rate", "--slo", "ttft_p99<=1s", "--rate", ",5,10")
    assert p.rates == [5.0, 10.0] and p.search_args[-4:] == ["--rate", ",5,10", "--arrivals", "poisson"]
