"""The command lines `swarm run` starts (swarm/orchestrate/commands.py), for plans made from its
options: the master gets the load's shape, the master and its workers the same common options."""

from __future__ import annotations

import argparse
import sys

import pytest

from swarm.core.errors import UsageError
from swarm.orchestrate import commands
from swarm.orchestrate.commands import LOCUSTFILE, master_command, sim_command, worker_command
from swarm.orchestrate.plan import plan_from_args
from swarm.orchestrate.run import configure, run_options
from tests.helpers.locust_parse import parse_locust

LOCUST = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]


def plan(*argv: str):
    p = argparse.ArgumentParser()
    configure(p)
    return plan_from_args(p.parse_args(["--run-id", "r1", "--out", "/o", *argv]), run_options())


def test_the_locustfile_is_the_swarms():
    assert LOCUSTFILE.name == "locustfile.py" and LOCUSTFILE.is_file()
    assert commands.locust_command() == LOCUST


def test_a_plain_run_master_and_worker():
    p = plan("--workers", "3", "-u", "8", "-t", "20s", "--stop-timeout", "15s")
    common = ["--host", "http://h:1", "--workload", "mixed", "--swarm-out", "/o", "--run-id", "r1",
              "--api-key-origin", "http://h:1"]  # fmt: skip
    assert master_command(p, "http://h:1", 5557, 9646) == [
        *LOCUST, "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port", "5557",
        "--expect-workers", "3", "--expect-workers-max-wait", "30", "-u", "8", "-r", "8.0",
        "--stop-timeout", "15s", "--csv", "/o/locust", "--html", "/o/locust.html", "--only-summary",
        "--summary-part", "--prometheus-host", "127.0.0.1", *common, "-t", "20s", "--prometheus-port", "9646",
    ]  # fmt: skip
    assert worker_command(p, "http://h:1", 5557) == [
        *LOCUST,
        "--worker",
        "--master-host",
        "127.0.0.1",
        "--master-port",
        "5557",
        *common,
    ]
    assert worker_command(p, "http://h:1", 5557, master_host="10.0.0.2")[7] == "10.0.0.2"


def test_the_common_options_reach_master_and_workers_alike():
    p = plan("--model", "a:3,b:1", "--goodput", "ttft<=1s", "--abort-on", "error_rate>50%/4s",
             "--max-tokens", "8", "--", "--seed", "3")  # fmt: skip
    common = commands.locust_common_args(p, "http://h:1")
    assert common[8:] == ["--model", "a:3,b:1", "--goodput", "ttft<=1s", "--abort-on", "error_rate>50%/4s",
                          "--max-tokens", "8", "--seed", "3", "--api-key-origin", "http://h:1"]  # fmt: skip
    master, worker = master_command(p, "http://h:1", 1, 2), worker_command(p, "http://h:1", 1)
    assert worker[-len(common) :] == common and master[master.index("--host") :][: len(common)] == common


def test_the_load_shape_goes_to_the_master_only():
    sweep = plan("--sweep", "2,4", "--stage-time", "5s", "--warmup", "1s", "--slo", "ttft_p99<=1s")
    assert commands.load_args(sweep) == ["--sweep", "2,4", "--stage-time", "5s", "--warmup", "1s",
                                         "--slo", "ttft_p99<=1s"]  # fmt: skip
    rate = plan("--rate", "1,2.5", "--arrivals", "constant")
    assert commands.load_args(rate) == ["--rate", "1,2.5", "--arrivals", "constant", "--stage-time", "30s",
                                        "--warmup", "0s"]  # fmt: skip
    search = plan("--search", "concurrency", "--slo", "ttft_p99<=800ms")
    assert commands.load_args(search)[:2] == ["--search", "concurrency"]
    assert commands.load_args(search)[-2:] == ["--slo", "ttft_p99<=800ms"]
    assert "--sweep" not in worker_command(sweep, "http://h:1", 1)
    assert master_command(rate, "http://h:1", 1, 2)[-2:] == ["--prometheus-port", "2"]


def test_the_embedded_simulator_serves_the_plans_models_on_loopback():
    p = plan("--model", "a:3,b:1", "--sim-arg=--max-num-seqs=8")
    assert sim_command(p, 8123) == [
        sys.executable, "-m", "swarm", "sim", "--host", "127.0.0.1", "--port", "8123",
        "--profile", "rtx5090x4-qwen3.6-27b", "--trace", "/o/sim-trace.jsonl", "--model", "a,b",
        "--max-num-seqs=8",
    ]  # fmt: skip
    assert commands.sim_models(None) == "sim-model" and commands.sim_models("m") == "m"


def test_every_process_and_swarm_run_itself_bind_the_key_to_the_same_origins(monkeypatch):
    """--api-key-origin (before -- or after it) or $SWARM_API_KEY_ORIGIN, else each --host endpoint:
    one value, handed to master and workers once, and the one swarm run's own requests follow."""
    from swarm.orchestrate.run import bound_key

    monkeypatch.delenv("SWARM_API_KEY_ORIGIN", raising=False)
    hosts = "http://a:1,http://b:2"
    for argv in (["--api-key-origin", "http://b:2/v1"], ["--", "--api-key-origin=http://b:2"]):
        p = plan("--host", hosts, *argv)
        common = commands.locust_common_args(p, hosts)
        assert common.count("--api-key-origin") == 1 and common[-2:] == ["--api-key-origin", "http://b:2"]
        assert bound_key(p, "k", p.hosts).bound == "http://b:2"
    p = plan("--host", hosts)
    assert (
        commands.locust_common_args(p, hosts)[-1]
        == bound_key(p, "k", p.hosts).bound
        == "http://a:1,http://b:2"
    )
    monkeypatch.setenv("SWARM_API_KEY_ORIGIN", "http://b:2")
    p = plan("--host", hosts)
    assert commands.locust_common_args(p, hosts)[-1] == bound_key(p, "k", p.hosts).bound == "http://b:2"
    monkeypatch.setenv("SWARM_API_KEY_ORIGIN", "b:2")
    with pytest.raises(UsageError, match="--api-key-origin 'b:2' is not an http"):
        plan("--host", hosts)


def test_the_masters_metrics_port_is_on_loopback_unless_a_handed_on_host_opens_it(tmp_path):
    """A one-machine run's /metrics listened on every interface while its web UI kept to loopback
    (issue 41); `--prometheus-host 0.0.0.0` handed on opens it (Locust's parser: the last one wins)."""
    argv = master_command(plan(), "http://h:1", 1, 2)
    assert argv[argv.index("--prometheus-host") + 1] == "127.0.0.1"
    opened = master_command(plan("--", "--prometheus-host", "0.0.0.0"), "http://h:1", 1, 2)
    parsed = parse_locust(LOCUSTFILE, opened[len(LOCUST) :], {}, tmp_path)
    assert parsed["prometheus_host"] == "0.0.0.0" and parsed["prometheus_port"] == 2
