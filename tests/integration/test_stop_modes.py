"""Nothing lost when users stop: every request the simulator received is one record, whatever
stopped it (REFERENCE.md §9; docs/reliability.md).

Each test runs real Locust processes against `swarm sim --trace` with a slow-decode profile
(tests/helpers/data/slow-decode.toml: 20 ms a step, 100 tokens an answer, so about 2 s each) and
stops them one way: the end of a headless `-t`, SIGTERM, Ctrl-C, Stop and Edit in the web UI,
fewer users in a new stage, a worker quitting. Then `reconcile` holds the client to the server:

- every trace line is exactly one record, matched by request id (a request cancelled before its
  response headers carries no id: those are matched by count, against aborted trace lines);
- a record is `ok` exactly where the server finished the request, `cancelled` where the server saw
  the client go (finish_reason "abort"), or where the server had just finished as the stop cut the
  stream (its last bytes were on the wire): those are counted and named, never guessed;
- the server's `vllm:request_success_total` equals the ok records plus those just-finished ones,
  and its `vllm:prompt_tokens_total` the prompt tokens of every record the server prefilled;
- summary.json (the swarm's own merge) says the same totals, cancelled on its own.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from swarm.core.tokens import count_chat_tokens
from tests.helpers.locust_run import LOCUSTFILE
from tests.helpers.sim_http import metric, scrape
from tests.helpers.support import DATA, HELPERS, free_port, sim_server, start, wait_for, wait_http

pytestmark = pytest.mark.integration

PROFILE = DATA / "slow-decode.toml"
STAGED = HELPERS / "locust_records_staged.py"
MAX_TOKENS = 100
WORDS = ["load", "test", "swarm", "stream", "token", "latency", "chunk", "server", "client", "measure"]


def prompt_file(path: Path, n: int = 200) -> Path:
    """Distinct prompts, each with its exact prompt length as the simulator counts it."""
    with open(path, "w") as f:
        for i in range(n):
            text = f"Request {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8 + i % 13))
            msgs = [{"role": "user", "content": text}]
            f.write(json.dumps({"messages": msgs, "prompt_tokens": count_chat_tokens(msgs)}) + "\n")
    return path


def locust_cmd(host: str, prompts: Path, out: Path, *args: str, locustfile: Path = LOCUSTFILE) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(locustfile), "--host", host,
            "--workload", "custom", "--prompt-file", str(prompts), "--max-tokens", str(MAX_TOKENS),
            "--ignore-eos", "--swarm-out", str(out), "--run-id", out.name, *args]  # fmt: skip


def records_of(out: Path) -> list[dict]:
    """Every record every process wrote (the test locustfile's JSON lines, one file per process)."""
    recs = []
    for f in sorted(out.glob("records-*.jsonl")):
        recs += [json.loads(line) for line in f.read_text().splitlines()]
    return recs


def read_summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def reconcile(trace_path: Path, samples: dict, records: list[dict], summary: dict | None) -> Counter:
    """The rule above; returns the outcome counts."""
    trace = [json.loads(line) for line in trace_path.read_text().splitlines()]
    assert trace and records, (len(trace), len(records))
    by_id = {t["id"]: t for t in trace}
    assert len(by_id) == len(trace), "the simulator traced a request twice"
    outcomes = Counter(r["outcome"] for r in records)
    assert set(outcomes) <= {"ok", "cancelled"}, outcomes  # nothing else can happen here
    ids = [r["request_id"] for r in records if r["request_id"] is not None]
    assert len(ids) == len(set(ids)), "a request recorded twice"
    assert set(ids) <= set(by_id), "a record the server never saw"
    unmatched = [t for t in trace if t["id"] not in set(ids)]
    no_id = [r for r in records if r["request_id"] is None]
    assert all(r["outcome"] == "cancelled" for r in no_id), no_id
    assert all(t["finish_reason"] == "abort" for t in unmatched), unmatched
    assert len(no_id) == len(unmatched), (len(no_id), len(unmatched))  # every request sent: one record
    assert len(records) == len(trace)
    just_finished = 0
    prefilled_prompt = 0
    for r in records:
        t = by_id.get(r["request_id"])
        if r["outcome"] == "ok":
            assert t is not None and t["finish_reason"] == "length", (r, t)
            assert r["output_tokens"] == t["completion_tokens"] == MAX_TOKENS
            assert r["prompt_tokens"] == t["prompt_tokens"]
        else:
            assert r["error"].startswith("cut by the swarm's stop"), r
            assert r["ttft_s"] is None or r["output_tokens"] <= MAX_TOKENS
            if t is not None and t["finish_reason"] != "abort":
                just_finished += 1  # the server's last bytes were on the wire when the stop cut
            if t is not None:
                assert r["prompt_tokens"] == t["prompt_tokens"]  # from the prompt file, not usage
        if t is not None and t["first_token_time"] is not None:
            prefilled_prompt += r["prompt_tokens"]
    success = sum(
        v for (name, _), v in samples.items() if name == "vllm:request_success_total"
    )  # every finish reason
    assert success == outcomes["ok"] + just_finished, (success, outcomes, just_finished)
    assert metric(samples, "vllm:prompt_tokens_total") == prefilled_prompt
    if summary is not None:
        total = summary["total"]
        assert total["requests"] == len(trace)
        assert total["cancelled"] == outcomes["cancelled"]
        assert sum(total["failures"].values()) == 0
        assert summary["drain"]["cancelled"] == outcomes["cancelled"]
        assert total["completed"] + summary["drain"]["requests"] == len(trace)
        assert total["qps"] == pytest.approx(total["completed"] / summary["duration_s"])
    print(f"\n{dict(outcomes)}; just finished: {just_finished}")
    return outcomes


@pytest.fixture
def sim(tmp_path):
    with sim_server(tmp_path, "--profile", str(PROFILE)) as s:
        yield s


@pytest.fixture
def prompts(tmp_path):
    return prompt_file(tmp_path / "prompts.jsonl")


def run_headless(
    tmp_path, sim, prompts, *args: str, users: int = 8, locustfile: Path = LOCUSTFILE
) -> tuple[Path, int]:
    out = tmp_path / "run"
    out.mkdir()
    env = {"SWARM_TEST_RECORDS": str(out / "records-local.jsonl")}
    cmd = locust_cmd(
        sim.url, prompts, out, "--headless", "-u", str(users), "-r", str(users), *args, locustfile=locustfile
    )
    with start(cmd, tmp_path / "locust.log", env) as proc:
        rc = proc.wait(timeout=120)
    return out, rc


@pytest.mark.serial
def test_run_end_with_stop_timeout_zero_cancels_and_counts_once(tmp_path, sim, prompts):
    """`-t` with --stop-timeout 0 (Locust's kill): the cut requests are `cancelled` records.

    A round of answers takes ~2.05 s and Locust's limit falls ~0.8 s before `-t` after spawning:
    with 6 s it lands mid third round, a second from either end of it, so at least one round has
    finished (`ok >= 8`) even when the first request waits 3 s for the target. (With 5 s it fell
    0.15 s after the second round: a slow first request on a fresh CI machine left 0 ok.)
    """
    out, rc = run_headless(tmp_path, sim, prompts, "-t", "6s", "--stop-timeout", "0")
    assert rc == 0, (tmp_path / "locust.log").read_text()[-3000:]  # cancelled is not a failure
    outcomes = reconcile(sim.trace, scrape(sim.url), records_of(out), read_summary(out))
    assert outcomes["cancelled"] >= 1 and outcomes["ok"] >= 8


@pytest.mark.serial  # the load's window within 1.5 s of -t: a loaded machine starts the users late (3.3 s)
def test_run_end_by_default_lets_requests_finish(tmp_path, sim, prompts):
    """No --stop-timeout: the swarm's graceful default lets in-flight requests finish (the drain)."""
    out, rc = run_headless(tmp_path, sim, prompts, "-t", "5s")
    assert rc == 0
    s = read_summary(out)
    outcomes = reconcile(sim.trace, scrape(sim.url), records_of(out), s)
    assert outcomes["cancelled"] == 0
    assert s["drain"]["requests"] >= 1  # finished after the stop: reported apart, not in QPS
    assert s["duration_s"] == pytest.approx(5.0, abs=1.5)  # the load's window, not the drain's


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_signal_mid_run(tmp_path, sim, prompts, sig):
    out = tmp_path / "run"
    out.mkdir()
    env = {"SWARM_TEST_RECORDS": str(out / "records-local.jsonl")}
    cmd = locust_cmd(sim.url, prompts, out, "--headless", "-u", "8", "-r", "8", "--stop-timeout", "0")
    with start(cmd, tmp_path / "locust.log", env) as proc:
        wait_for(lambda: len(records_of(out)) >= 8, 60, "requests to finish")
        proc.popen.send_signal(sig)  # (the process only, as a terminal's Ctrl-C or `kill` would)
        proc.wait(timeout=60)
    reconcile(sim.trace, scrape(sim.url), records_of(out), read_summary(out))


def test_web_ui_edit_and_stop(tmp_path, sim, prompts):
    """Edit to fewer users, then Stop, in the web UI (the HTTP calls its buttons make)."""
    out = tmp_path / "run"
    out.mkdir()
    port = free_port()
    env = {"SWARM_TEST_RECORDS": str(out / "records-local.jsonl")}
    cmd = locust_cmd(sim.url, prompts, out, "--web-host", "127.0.0.1", "--web-port", str(port),
                     "--autostart", "-u", "8", "-r", "8", "--stop-timeout", "0")  # fmt: skip
    web = f"http://127.0.0.1:{port}"
    with start(cmd, tmp_path / "locust.log", env) as proc:
        wait_http(web + "/", timeout=60, proc=proc.popen, log=proc.log)
        wait_for(lambda: len(records_of(out)) >= 8, 60, "requests to finish")
        edit = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 8, "host": sim.url}).encode()
        with urllib.request.urlopen(web + "/swarm", data=edit, timeout=10) as r:  # Edit: 8 -> 2 users
            assert r.status == 200
        n = len(records_of(out))
        wait_for(lambda: len(records_of(out)) >= n + 2, 60, "the two users left to go on")
        with urllib.request.urlopen(web + "/stop", data=b"", timeout=10) as r:  # Stop (a POST)
            assert r.status == 200
        time.sleep(1)
        proc.popen.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    outcomes = reconcile(sim.trace, scrape(sim.url), records_of(out), read_summary(out))
    assert outcomes["cancelled"] >= 6  # the Edit cut six users mid-answer (and Stop the other two)


def test_fewer_users_in_a_new_stage(tmp_path, sim, prompts):
    """A sweep down (8 then 2 users): the users the new stage removes are cut, and counted once."""
    out, rc = run_headless(
        tmp_path,
        sim,
        prompts,
        "--sweep",
        "8,2",
        "--stage-time",
        "5s",
        "--warmup",
        "0s",
        "--stop-timeout",
        "0",
        locustfile=STAGED,
    )
    assert rc == 0, (tmp_path / "locust.log").read_text()[-3000:]
    s = read_summary(out)
    outcomes = reconcile(sim.trace, scrape(sim.url), records_of(out), s)
    assert outcomes["cancelled"] >= 6
    stages = {st["stage"]: st for st in s["stages"]}
    assert stages[0]["total"]["cancelled"] >= 6  # sent in stage 0, cut by stage 1's ramp-down


def test_worker_quitting_mid_run(tmp_path, sim, prompts):
    """Two workers; one gets SIGTERM mid-run: its cut requests are recorded and handed over."""
    out = tmp_path / "run"
    out.mkdir()
    mport = free_port()
    master_cmd = locust_cmd(sim.url, prompts, out, "--master", "--headless", "--master-bind-host", "127.0.0.1",
                            "--master-bind-port", str(mport), "--expect-workers", "2", "-u", "8", "-r", "8",
                            "-t", "10s", "--stop-timeout", "0")  # fmt: skip
    with start(
        master_cmd, tmp_path / "master.log", {"SWARM_TEST_RECORDS": str(out / "records-master.jsonl")}
    ) as m:
        workers = []
        for i in range(2):
            wcmd = locust_cmd(sim.url, prompts, out, "--worker", "--master-host", "127.0.0.1",
                              "--master-port", str(mport))  # fmt: skip
            env = {"SWARM_TEST_RECORDS": str(out / f"records-w{i}.jsonl")}
            workers.append(start(wcmd, tmp_path / f"worker{i}.log", env))
        with workers[0] as w0, workers[1]:
            wait_for(lambda: len(records_of(out)) >= 8, 60, "requests to finish")
            w0.popen.send_signal(signal.SIGTERM)
            w0.wait(timeout=60)
            rc = m.wait(timeout=120)
    assert rc == 0, (tmp_path / "master.log").read_text()[-3000:]
    outcomes = reconcile(sim.trace, scrape(sim.url), records_of(out), read_summary(out))
    assert outcomes["cancelled"] >= 2  # the quitting worker's users, then the run's end
