"""The chat_session workload: conversations resend their history with the assistant's answer content,
ShareGPT conversations replay their own user turns, think times and turns are DISTs, and bad
options are one-line usage errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from swarm.core.errors import UsageError
from swarm.core.tokenizer import PseudoTokenizer
from swarm.core.tokens import count_chat_tokens
from swarm.live.options import LLMOptions
from swarm.load.dists import parse_dist
from swarm.load.sessions import answer_content
from swarm.load.workloads import Knobs, build


def sessions(**kw):
    w = build("chat_session", Knobs(**kw))
    w.prepare(PseudoTokenizer(), progress=lambda _: None)
    return w


def test_each_turn_resends_the_history_with_the_answers_content():
    w = sessions(input_tokens="40", output_tokens="8", turns="3", seed=5)
    conv = w.start(random.Random(1), "u-1")
    sent = []
    for k in range(3):
        req = conv.next_request()
        assert req.workload == "chat_session" and req.max_tokens == 8 and req.ignore_eos
        sent.append(req.messages)
        answer = f"<think>private {k}</think>\n\nanswer {k}"
        conv.answered(req, answer, count_chat_tokens(req.messages), 8)
    assert conv.done and conv.next_request() is None
    first, second, third = sent
    assert len(first) == 1 and count_chat_tokens(first) == 40  # part 1's generator: exact length
    assert second[:1] == first and second[1] == {"role": "assistant", "content": "answer 0"}
    assert third[:3] == second and third[3] == {"role": "assistant", "content": "answer 1"}
    users = [m["content"] for m in third if m["role"] == "user"]
    assert len(set(users)) == 3  # every user message is new (unique markers)


def test_the_next_prompt_estimate_bounds_what_the_server_will_count():
    w = sessions(input_tokens="60", output_tokens="10", turns="4", seed=2)
    conv = w.start(random.Random(3), "u-1")
    req = conv.next_request()
    assert conv.prompt_estimate(req) == 60
    conv.answered(req, "one two three", count_chat_tokens(req.messages), 10)  # 10 output tokens, 3 in content
    nxt = conv.next_request()
    assert conv.prompt_estimate(nxt) >= count_chat_tokens(nxt.messages)


def test_a_failed_turn_ends_the_conversation():
    conv = sessions(input_tokens="40", turns="5").start(random.Random(1), "u-1")
    conv.next_request()
    conv.failed()
    assert conv.done and conv.next_request() is None


def test_sharegpt_conversations_replay_their_own_user_turns(tmp_path):
    data = [
        {"id": "a", "conversations": [
            {"from": "human", "value": "first question about caches"},
            {"from": "gpt", "value": "a reference answer that is long enough"},
            {"from": "human", "value": "and a follow-up"},
            {"from": "gpt", "value": "another reference answer"},
        ]},
    ]  # fmt: skip
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    w = sessions(dataset=f"sharegpt:{path}", max_tokens=20)
    conv = w.start(random.Random(1), "u-1")
    assert conv.planned == 2  # the conversation's own turns (no --turns given)
    r1 = conv.next_request()
    assert r1.messages == [{"role": "user", "content": "first question about caches"}]
    assert r1.ignore_eos and r1.max_tokens > 4  # turn 1: the reference answer's length, as `dataset`
    conv.answered(r1, "my answer", 12, 6)
    r2 = conv.next_request()
    assert [m["content"] for m in r2.messages] == [
        "first question about caches",
        "my answer",
        "and a follow-up",
    ]
    assert (r2.max_tokens, r2.ignore_eos) == (20, False)
    conv.answered(r2, "done", 30, 3)
    assert conv.done
    assert sessions(dataset=f"sharegpt:{path}", turns="1").start(random.Random(1), "u-2").planned == 1


def test_answer_content_strips_a_leading_think_block_only():
    assert answer_content("<think>a\nb</think>\n\nthe answer") == "the answer"
    assert answer_content("the answer <think>kept</think>") == "the answer <think>kept</think>"


def test_think_time_is_a_real_dist_of_seconds():
    d = parse_dist("0.5-2.5", "--think-time", real=True)
    rng = random.Random(0)
    draws = [d.draw_real(rng) for _ in range(200)]
    assert all(0.5 <= x <= 2.5 for x in draws) and len(set(draws)) > 100
    assert parse_dist("0", "--think-time", real=True).draw_real(rng) == 0.0
    assert parse_dist("lognormal:2:0.5", "--think-time", real=True).draw_real(rng) > 0
    for bad in ("-1", "abc", "3-1", "lognormal:0:1"):
        with pytest.raises(UsageError, match="--think-time"):
            parse_dist(bad, "--think-time", real=True)
    with pytest.raises(UsageError, match="--turns"):
        build("chat_session", Knobs(turns="0"))


class Parsed:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_session_header_must_be_a_header_name():
    assert LLMOptions.from_parsed(Parsed(session_header="x-session-id")).session_header == "x-session-id"
    for bad in ("x session", "x-id:", "é"):
        with pytest.raises(UsageError, match="--session-header"):
            LLMOptions.from_parsed(Parsed(session_header=bad))
    assert LLMOptions.from_parsed(Parsed(workload="chat_session", dataset=None)).knobs.turns is None


def test_bad_turns_on_the_command_line_is_one_line_and_exit_2():
    cmd = [sys.executable, "-m", "locust", "-f", "swarm/locustfile.py", "--headless", "--host", "http://127.0.0.1:9",
           "--workload", "chat_session", "--turns", "two"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-1500:]
    assert "bad --turns 'two'" in p.stderr
