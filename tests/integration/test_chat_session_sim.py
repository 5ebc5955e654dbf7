"""`chat_session` through a real `swarm run` (master + 2 workers) on the simulator: each turn resends
the history with the assistant's actual answers, so the prompt grows by turn exactly as the history
implies (checked against the simulator's trace), the prefix cache hits the previous turn's prompt,
the session header reaches the server, and a conversation that would pass max_model_len is cut
and counted."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from swarm.core.tokens import CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_REPLY_PRIMER, count_tokens
from tests.helpers.support import REPO, swarm_cmd

SHAREGPT = REPO / "swarm" / "load" / "prompts" / "sharegpt_sample.json"

INPUT, OUTPUT, BLOCK = 40, 20, 16  # synthetic user messages; the simulator's default block size
USER_CONTENT = (
    INPUT - CHAT_TOKENS_PER_MESSAGE - CHAT_TOKENS_REPLY_PRIMER
)  # a one-message prompt of INPUT tokens


def run(
    tmp_path, *extra: str, turns: str | None, source: tuple[str, ...] = ("--input-tokens", str(INPUT))
) -> tuple[subprocess.CompletedProcess, pd.DataFrame, dict]:
    out = run_dir(tmp_path)
    cmd = swarm_cmd("run", "--workers", "2", "-u", "6", "-t", "6s", "--out", str(out), "--sim-profile", "instant",
                    *extra, "--workload", "chat_session", "--", *(("--turns", turns) if turns else ()), *source,
                    "--output-tokens", str(OUTPUT), "--think-time", "0.05-0.15",
                    "--session-header", "x-session-id")  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    records = pd.read_parquet(out / "requests.parquet")
    trace = pd.read_json(out / "sim-trace.jsonl", lines=True)
    df = records.merge(trace, left_on="request_id", right_on="id", suffixes=("", "_sim"), validate="1:1")
    assert len(df) == len(records) > 40
    return p, df.sort_values(["session_id", "turn"]), json.loads((out / "summary.json").read_text())


def run_dir(tmp_path):
    return tmp_path / "run"


@pytest.mark.integration
def test_four_turns_grow_as_the_history_and_hit_the_prefix_cache(tmp_path):
    p, df, summary = run(tmp_path, turns="4")
    out = run_dir(tmp_path)
    assert (df.outcome == "ok").all() and df.session_id.notna().all()
    assert (df.session == df.session_id).all()  # --session-header: the id reached the server
    assert (df.prompt_tokens == df.prompt_tokens_sim).all()
    for sid, conv in df.groupby("session_id"):
        assert list(conv.turn) == list(range(1, len(conv) + 1)) and len(conv) <= 4, sid
        prompts, answers, cached = (
            list(conv.prompt_tokens),
            list(conv.answer_tokens),
            list(conv.cached_tokens_sim),  # the trace's (records: None, the vLLM face without the flag)
        )
        assert prompts[0] == INPUT and cached[0] == 0
        for k in range(1, len(conv)):
            # the history as sent: last prompt + the assistant's answer as a message + the new user message
            want = (
                prompts[k - 1]
                + CHAT_TOKENS_PER_MESSAGE
                + answers[k - 1]
                + CHAT_TOKENS_PER_MESSAGE
                + USER_CONTENT
            )
            assert prompts[k] == want, (sid, k, prompts, answers)
            assert cached[k] == BLOCK * (prompts[k - 1] // BLOCK), (
                sid,
                k,
                prompts,
                cached,
            )  # the last prompt's full blocks
    by_turn = df.groupby("turn").agg(
        prompt=("prompt_tokens", "sum"), cached=("cached_tokens_sim", "sum"), n=("turn", "size")
    )
    rate = list(by_turn.cached / by_turn.prompt)
    assert list(by_turn.index) == [1, 2, 3, 4] and rate[0] == 0 and rate == sorted(rate) and rate[3] > 0.5, (
        rate
    )
    sessions = summary["sessions"]
    assert sessions["started"] == df.session_id.nunique() == by_turn.n[1]
    assert sessions["cut_at_max_model_len"] == 0
    for turn, key in ((1, "1"), (2, "2"), (3, "3"), (4, "4+")):
        block = sessions["turns"][key]
        assert block["requests"] == by_turn.n[turn]
        assert block["prompt_tokens_mean"] == pytest.approx(by_turn.prompt[turn] / by_turn.n[turn])
    assert 0 < sessions["in_flight_mean"] < 6  # the users think between turns: fewer requests in flight
    assert f"conversations: {sessions['started']} started, 0 cut at max_model_len; 6 users" in p.stdout
    assert "requests in flight on average" in p.stdout and "\n  turn 4+" in p.stdout, p.stdout[-1500:]
    report = (out / "report.html").read_text()
    assert "<h2>Conversations</h2>" in report and "<td>4+</td>" in report
    assert "server prefix-cache hit rate" in report


@pytest.mark.integration
def test_a_conversation_that_would_pass_max_model_len_starts_anew_and_is_counted(tmp_path):
    # turn 4's prompt is ~226 tokens + 20 to answer: about fits 250 (by the user's estimate); turn 5 never
    # does; with 6 turns planned, every conversation a user leaves for a new one was cut
    _, df, summary = run(tmp_path, "--sim-arg=--max-model-len=250", turns="6")
    assert (df.outcome == "ok").all() and df.turn.max() == 4
    assert ((df.prompt_tokens + df.output_tokens) <= 250).all()
    ids = {
        (u, int(k)) for u, k in (sid.rsplit("-", 1) for sid in df.session_id)
    }  # (user, its n-th conversation)
    cut = sum((u, k + 1) in ids for u, k in ids)
    assert cut > 5 and summary["sessions"]["cut_at_max_model_len"] == cut


@pytest.mark.integration
def test_sharegpt_conversations_replay_their_user_turns(tmp_path):
    """The shipped ShareGPT sample (89 one-turn and 14 two-turn conversations): each conversation is
    sent with its own number of turns, and a second turn's prompt is its first prompt + the answer +
    the conversation's second human message."""
    convs = json.loads(SHAREGPT.read_text())
    humans = [[t["value"] for t in c["conversations"] if t["from"] == "human"] for c in convs]
    pairs = {
        (count_tokens(h[0]), count_tokens(h[1])) for h in humans if len(h) == 2
    }  # (first, second) message
    _, df, summary = run(
        tmp_path, turns=None, source=("--dataset", f"sharegpt:{SHAREGPT}", "--tokenizer", "server")
    )
    assert (df.outcome == "ok").all() and set(df.turn) == {1, 2}
    assert summary["sessions"]["started"] == df.session_id.nunique()
    twos = 0
    for sid, conv in df.groupby("session_id"):
        if len(conv) < 2:
            continue
        p1, p2 = conv.prompt_tokens.iloc[0], conv.prompt_tokens.iloc[1]
        user1 = p1 - CHAT_TOKENS_PER_MESSAGE - CHAT_TOKENS_REPLY_PRIMER
        added = p2 - p1 - 2 * CHAT_TOKENS_PER_MESSAGE - conv.answer_tokens.iloc[0]
        assert (user1, added) in pairs, (sid, p1, p2)
        twos += 1
    assert twos > 0
