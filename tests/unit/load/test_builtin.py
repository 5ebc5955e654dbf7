"""swarm.load.builtin: RAG prompt building (sizes, the common prefix, the layout, the answer passage)."""

from __future__ import annotations

import random

import pytest

from swarm.core.tokens import chat_prompt_tokens, count_chat_tokens
from swarm.load.workloads import Knobs, build

# -- rag ------------------------------------------------------------------------------------------


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.parametrize("share", [0.0, 0.2, 0.5, 0.8])
@pytest.mark.parametrize("size", [(2500, 2500), (2000, 3000), (6000, 8000)])
def test_rag_size_and_common_prefix(share: float, size: tuple[int, int]) -> None:
    w = build("rag", Knobs(rag_prefix_share=share, rag_tokens=size, rag_passages=4))
    rng = random.Random(5)
    prompts = [chat_prompt_tokens(w.next_request(rng).messages) for _ in range(40)]
    for p in prompts:
        assert size[0] * 0.97 <= len(p) <= size[1] * 1.03, len(p)
    # the prefix each prompt shares with the longest-prefix prompt of the set
    shares = []
    for p in prompts:
        shares.append(max(_common_prefix(p, q) for q in prompts if q is not p) / len(p))
    assert min(shares) >= share - 0.03, min(shares)
    if share == 0.0:
        # only the template's first tokens (unless two prompts happen to retrieve the same first passage)
        assert sorted(shares)[len(shares) // 2] < 0.01
    else:
        assert sum(shares) / len(shares) <= share + 0.05


def test_rag_prompt_layout() -> None:
    w = build("rag", Knobs(rag_passages=3, rag_prefix_share=0.5, rag_tokens=(2500, 2500)))
    r = w.next_request(random.Random(6))
    system, user = r.messages
    assert system["role"] == "system" and system["content"].startswith("你是星河云")
    assert user["content"].count("\n[") == 3  # three passages, numbered
    question = user["content"].rsplit("\n\n", 1)[1]
    assert question.startswith(("问题:", "Question: "))
    assert count_chat_tokens(r.messages) == len(chat_prompt_tokens(r.messages))


def test_rag_answer_passage_is_always_included() -> None:
    w = build("rag", Knobs(rag_passages=1, rag_prefix_share=0.9, rag_tokens=(2000, 2000)))
    rng = random.Random(7)
    for _ in range(50):
        user = w.next_request(rng).messages[-1]["content"]
        body, question = user.rsplit("\n\n", 1)
        subject = question.split("的每个账号")[0].split("account of ")[-1].removeprefix("问题:")
        assert subject.split(" create")[0] in body
