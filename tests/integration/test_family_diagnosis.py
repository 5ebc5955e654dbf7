"""The diagnosis per server family on the simulator's faces (issue 29): for SGLang, TGI and
TensorRT-LLM, real `swarm run`s against `swarm sim --server F`, one with the scheduler capped
(--max-num-seqs 4 under 16 users) and one with a KV pool that holds about five requests
(benchmarks/diagnosis_matrix.py's kv scenario: --kv-cache-tokens 1600, 256-token prompts, 64-token
answers). The six sims and runs go at once (about 45 s on two cores).

What must hold, per family: the capped run is diagnosed as the sequence cap, worded with that
family's own running and waiting gauges, and the other as KV-bound from its KV gauge (TGI's is the
batch token budget its running batch reserves), each cause seen in the face's own gauges as
sampled raw during the run, and nothing else named; every run's records and summary reconcile
exactly with the face's own request and token counters, scraped when the run is over."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from dataclasses import dataclass

import pytest

from swarm.core.recordfile import read_table
from tests.helpers.support import REPO, free_port, start, swarm_cmd, wait_http
from tests.helpers.truth import assert_causes_shown_by_gauges

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

PROFILE = str(REPO / "benchmarks" / "profiles" / "diagnosis-matrix.toml")
USERS = 16
CAP = 4
STAGE_S, WARMUP_S = 15, 3
CASES = {
    "cap": ("--max-num-seqs", str(CAP)),
    "kv": ("--kv-cache-tokens", "1600", "--max-model-len", "1024"),  # 100 blocks: ~5 requests of 20
}
LOAD = ("--input-tokens", "256", "--output-tokens", "64", "--seed", "1")
FAMILIES = ("sglang", "tgi", "trtllm")


@dataclass(frozen=True)
class Names:
    """A family's own metric names, as its source writes them (docs/server-families.md)."""

    path: str  # where its Prometheus text is served
    running: str
    waiting: str
    kv: tuple[str, ...]  # the gauge, or (numerator, denominator) of TGI's proxy
    success: str
    prompt: str
    generation: str


NAMES = {
    "sglang": Names(
        "/metrics", "sglang:num_running_reqs", "sglang:num_queue_reqs", ("sglang:token_usage",),
        "sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
    ),
    "tgi": Names(  # no token counters: the length histograms' sums; KV: the batch budget reserved
        "/metrics", "tgi_batch_current_size", "tgi_queue_size",
        ("tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens"),
        "tgi_request_success", "tgi_request_input_length_sum", "tgi_request_generated_tokens_sum",
    ),
    "trtllm": Names(
        "/prometheus/metrics", "trtllm_num_requests_running", "trtllm_num_requests_waiting",
        ("trtllm_kv_cache_utilization",), "trtllm_request_success_total", "trtllm_prompt_tokens_total",
        "trtllm_generation_tokens_total",
    ),
}  # fmt: skip


def raw(url: str) -> dict[str, float]:
    """The face's page read without the swarm's parser: each sample name's values summed over its
    labels (these faces write one series per name, or one per finished_reason)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            name = name.split("{", 1)[0]
            out[name] = out.get(name, 0.0) + float(value)
    return out


def gauges(fam: str, page: dict[str, float]) -> tuple[float, float, float]:
    """(running, waiting, KV share) from the family's own gauges."""
    n = NAMES[fam]
    kv = page[n.kv[0]] / page[n.kv[1]] if len(n.kv) == 2 else page[n.kv[0]]
    return page[n.running], page[n.waiting], kv


def sample(urls: dict[tuple[str, str], str], into: dict, stop: threading.Event) -> None:
    """Every 0.5 s each face's gauges, raw, with the time: the truth the diagnosis is held to. A
    scrape that fails is kept under "failed" (the tests say so), not skipped."""
    while not stop.wait(0.5):
        for key, url in urls.items():
            try:
                into[key].append((time.time(), *gauges(key[0], raw(url))))
            except OSError as e:
                into["failed"].append(f"{key}: {e}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("families")
    keys = [(f, c) for f in FAMILIES for c in CASES]
    with contextlib.ExitStack() as stack:
        base = {}
        for fam, case in keys:  # all started before any is waited for
            port = free_port()
            cmd = swarm_cmd("sim", "--host", "127.0.0.1", "--port", str(port), "--server", fam,
                            "--profile", PROFILE, "--seed", "1", *CASES[case])  # fmt: skip
            sim = stack.enter_context(start(cmd, tmp / f"sim-{fam}-{case}.log"))
            base[fam, case] = (f"http://127.0.0.1:{port}", sim)
        for url, sim in base.values():
            wait_http(url + "/health", timeout=60, proc=sim.popen, log=sim.log)
        pages = {k: url + NAMES[k[0]].path for k, (url, _) in base.items()}
        seen: dict = {"failed": [], **{k: [] for k in keys}}
        stop = threading.Event()
        sampler = threading.Thread(target=sample, args=(pages, seen, stop), daemon=True)
        sampler.start()
        procs = {}
        for fam, case in keys:
            out = tmp / f"{fam}-{case}"
            tgi = ("--no-ignore-eos",) if fam == "tgi" else ()  # TGI cannot ignore EOS: max_tokens alone
            cmd = swarm_cmd("run", "--host", base[fam, case][0], "--workers", "1", "--sweep", str(USERS),
                            "--stage-time", f"{STAGE_S}s", "--warmup", f"{WARMUP_S}s", "--workload", "synthetic",
                            "--out", str(out), "--", *LOAD, *tgi)  # fmt: skip
            procs[fam, case] = (out, stack.enter_context(start(cmd, tmp / f"run-{fam}-{case}.log")))
        results = {}
        for key, (out, run) in procs.items():
            results[key] = {"rc": run.wait(timeout=240), "out": out}
        stop.set()
        sampler.join()
        for key, (_, run) in procs.items():  # the face's own counters once every run is over
            results[key].update(
                text=run.output(), counters=raw(pages[key]), seen=seen[key], failed=seen["failed"]
            )
    return results


def _diagnosis(r: dict) -> list[dict]:
    assert r["rc"] == 0, r["text"][-3000:]
    return json.loads((r["out"] / "diagnosis.json").read_text())


def _stage_samples(r: dict) -> list[tuple[float, float, float, float]]:
    """The raw gauge samples inside the run's measured stage (after its warm-up)."""
    (stage,) = json.loads((r["out"] / "summary.json").read_text())["stage_timeline"]
    lo, hi = stage["start_wall_s"] + stage["warmup_s"], stage["end_wall_s"]
    inside = [s for s in r["seen"] if lo <= s[0] <= hi]
    assert not r["failed"] and len(inside) >= 5, (stage, r["failed"], r["seen"])
    return inside


def _bottlenecks(found: list[dict]) -> list[str]:
    return sorted(f["kind"] for f in found if f["kind"] not in ("client_vs_server",))


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_sequence_cap_is_diagnosed_from_the_familys_own_gauges(runs, fam):
    r, n = runs[fam, "cap"], NAMES[fam]
    found = _diagnosis(r)
    assert _bottlenecks(found) == ["max_num_seqs_cap"], found
    (cap,) = [f for f in found if f["kind"] == "max_num_seqs_cap"]
    assert f"running requests sat pinned at {CAP} " in cap["text"], cap
    assert f"; {n.running})" in cap["text"] and f"({n.waiting})" in cap["text"], cap
    assert_causes_shown_by_gauges(r["out"], cap=CAP)  # as the swarm parsed them
    inside = _stage_samples(r)  # the face's own gauges: never more than the cap, a queue behind it
    assert max(s[1] for s in inside) == CAP and min(s[2] for s in inside) > 0, inside
    assert max(s[3] for s in inside) < 0.5, inside


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_kv_bound_is_diagnosed_from_the_familys_kv_gauge(runs, fam):
    r, n = runs[fam, "kv"], NAMES[fam]
    found = _diagnosis(r)
    assert _bottlenecks(found) == ["kv_bound"], found
    (kv,) = [f for f in found if f["kind"] == "kv_bound"]
    assert kv["text"].startswith(f"At {USERS} users the server was KV-bound: "), kv
    assert f"; {' / '.join(n.kv)})" in kv["text"], kv
    assert_causes_shown_by_gauges(r["out"])
    inside = _stage_samples(r)  # the face's own KV gauge full while requests wait, under the users
    assert max(s[3] for s in inside) > 0.9 and any(s[2] > 0 for s in inside), inside
    assert max(s[1] for s in inside) < USERS, inside


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fam", FAMILIES)
def test_the_records_reconcile_exactly_with_the_faces_counters(runs, fam, case):
    r, n = runs[fam, case], NAMES[fam]
    assert r["rc"] == 0 and "Traceback" not in r["text"], r["text"][-3000:]
    records = read_table(r["out"] / "records").to_pylist()
    ok = [x for x in records if x["outcome"] == "ok"]
    assert records and len(ok) == len(records), {x["outcome"] for x in records}
    c = r["counters"]
    assert len(ok) == c[n.success]
    assert sum(x["prompt_tokens"] for x in ok) == c[n.prompt]
    assert sum(x["output_tokens"] for x in ok) == c[n.generation]
    total = json.loads((r["out"] / "summary.json").read_text())["total"]
    assert (total["requests"], total["prompt_tokens"], total["output_tokens"]) == (
        c[n.success],
        c[n.prompt],
        c[n.generation],
    )
