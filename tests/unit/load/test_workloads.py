"""swarm.load.workloads: the shipped workloads, weighted mixes, RAG prompt building, custom files."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from swarm.core.errors import UsageError
from swarm.core.tokens import chat_prompt_tokens, count_chat_tokens
from swarm.load.workloads import WORKLOADS, Knobs, Mix, build, load_prompt_file, parse_mix, parse_token_range

SHIPPED = [n for n in WORKLOADS if n not in ("custom", "dataset")]  # (these two read a file: own tests)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_workload_builds_requests(name: str) -> None:
    w = build(name)
    if w.needs_tokenizer:  # synthetic: its prompts are built before the load
        from swarm.core.tokenizer import PseudoTokenizer

        w.prepare(PseudoTokenizer(), progress=lambda _: None)
    rng = random.Random(0)
    for _ in range(50):
        r = w.next_request(rng)
        assert r.workload == name and r.max_tokens >= 1 and r.messages
        assert all(isinstance(m["content"], str) and m["content"] for m in r.messages)
        assert r.prompt_text()


def test_seed_defaults() -> None:
    rng = random.Random(1)
    mixed = [build("mixed").next_request(rng) for _ in range(4000)]
    assert {r.max_tokens for r in mixed} == {1024}
    assert 0.17 < sum(r.thinking for r in mixed) / len(mixed) < 0.23  # 80% direct / 20% thinking
    short = [build("short_qa").next_request(rng) for _ in range(500)]
    assert {r.max_tokens for r in short} == {50} and not any(r.thinking for r in short)
    assert {r.messages[0]["content"] for r in short} >= {"1+1=?", "HTTP 默认端口", "微信英文是"}
    chat = [build("chat").next_request(rng).max_tokens for _ in range(2000)]
    assert min(chat) == 150 and max(chat) == 256
    assert build("long_output").next_request(rng).max_tokens == 512
    assert build("translate").next_request(rng).max_tokens == 64


def test_knobs_override() -> None:
    rng = random.Random(2)
    k = Knobs(thinking_ratio=0.5, max_tokens=7)
    reqs = [build("chat", k).next_request(rng) for _ in range(1000)]
    assert {r.max_tokens for r in reqs} == {7}
    assert 0.45 < sum(r.thinking for r in reqs) / len(reqs) < 0.55
    assert not any(build("mixed", Knobs(thinking_ratio=0.0)).next_request(rng).thinking for _ in range(200))


def test_both_languages_ship() -> None:
    rng = random.Random(3)
    sets = [n for n in SHIPPED if not build(n).needs_tokenizer]  # (synthetic: English words, tested apart)
    texts = " ".join(build(n).next_request(rng).prompt_text() for n in sets for _ in range(40))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in texts) and " the " in texts


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("mixed", [("mixed", 1.0)]),
        ("short_qa:3,chat:1", [("short_qa", 3.0), ("chat", 1.0)]),
        (" rag : 0.5 , translate ", [("rag", 0.5), ("translate", 1.0)]),
    ],
)
def test_parse_mix(spec: str, want: list[tuple[str, float]]) -> None:
    assert [(w.name, weight) for w, weight in parse_mix(spec)] == want


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty --workload"),
        ("nosuch", "unknown workload 'nosuch'"),
        ("chat:0", "bad weight '0'"),
        ("chat:-1", "bad weight '-1'"),
        ("chat:x", "bad weight 'x'"),
        ("chat:inf", "bad weight 'inf'"),
        ("chat,chat", "listed twice"),
        ("chat,,rag", "empty name"),
        ("custom", "needs --prompt-file"),
    ],
)
def test_parse_mix_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_mix(spec)


def test_mix_draws_by_weight() -> None:
    mix = Mix.from_spec("short_qa:3,chat:1")
    rng = random.Random(4)
    counts = Counter(mix.next_request(rng).workload for _ in range(8000))
    assert 2.7 < counts["short_qa"] / counts["chat"] < 3.3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"thinking_ratio": 1.5}, "--thinking-ratio"),
        ({"max_tokens": 0}, "--max-tokens"),
        ({"rag_passages": 0}, "--rag-passages"),
        ({"rag_prefix_share": 0.95}, "--rag-prefix-share"),
        ({"rag_tokens": (100, 200)}, "--rag-tokens"),
    ],
)
def test_knob_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Knobs(**kwargs)


def test_token_range() -> None:
    assert parse_token_range("2500") == (2500, 2500) and parse_token_range("2000-3000") == (2000, 3000)
    for bad in ("", "a-b", "3000-2000", "1-2-3"):
        with pytest.raises(UsageError, match="--rag-tokens"):
            parse_token_range(bad)


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


# -- custom files --------------------------------------------------------------------------------


def test_custom_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(
        '{"prompt": "你好"}\n\n'
        '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], '
        '"max_tokens": 12, "thinking": true}\n'
        '{"prompt": "x", "thinking": "off"}\n',
        encoding="utf-8",
    )
    prompts = load_prompt_file(f)
    assert len(prompts) == 3
    assert prompts[0].messages == [{"role": "user", "content": "你好"}] and prompts[0].max_tokens is None
    assert prompts[1].max_tokens == 12 and prompts[1].thinking is True and len(prompts[1].messages) == 2
    assert prompts[2].thinking is False
    w = build("custom", Knobs(prompt_file=str(f)))
    reqs = [w.next_request(random.Random(i)) for i in range(30)]
    assert {r.max_tokens for r in reqs} == {256, 12}


def test_custom_csv(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text('prompt,max_tokens,thinking\n"line one\nline two",8,yes\nhello,,\n', encoding="utf-8")
    prompts = load_prompt_file(f)
    assert prompts[0].messages[0]["content"] == "line one\nline two"
    assert (prompts[0].max_tokens, prompts[0].thinking) == (8, True)
    assert (prompts[1].max_tokens, prompts[1].thinking) == (None, None)
    g = tmp_path / "m.csv"
    g.write_text('messages\n"[{""role"": ""user"", ""content"": ""hi""}]"\n', encoding="utf-8")
    assert load_prompt_file(g)[0].messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.jsonl", '{"prompt": "ok"}\n{"prompt": \n', ":2: not valid JSON"),
        ("a.jsonl", '{"prompt": "ok"}\n\n["x"]\n', ":3: each line must be a JSON object"),
        ("a.jsonl", '{"prompt": ""}\n', ":1: needs a non-empty 'prompt'"),
        ("a.jsonl", '{"prompt": "a", "max_tokens": 0}\n', ":1: 'max_tokens' must be a whole number"),
        ("a.jsonl", '{"prompt": "a", "max_tokens": 2.5}\n', ":1: 'max_tokens' must be a whole number"),
        ("a.jsonl", '{"prompt": "a", "thinking": "maybe"}\n', ":1: 'thinking' must be true or false"),
        ("a.jsonl", '{"prompt": "a", "temperature": 1}\n', ":1: unknown field"),
        ("a.jsonl", '{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}\n', ":1: give either"),
        ("a.jsonl", '{"messages": [{"content": "b"}]}\n', ":1: message 1 needs a string 'role'"),
        ("a.jsonl", '{"messages": []}\n', ":1: 'messages' must be a non-empty list"),
        ("a.csv", "prompt,max_tokens\nok,5\nbad,x\n", ":3: 'max_tokens' must be a whole number"),
        ("a.csv", 'prompt\nok\n"two\nlines"\n""\n', ":5: needs a non-empty 'prompt'"),
        ("a.csv", "text\nhello\n", ":1: the CSV header needs a 'prompt' or 'messages' column"),
        ("a.csv", "prompt,extra\nhello,1\n", ":1: unknown column"),
        ("a.csv", "prompt\nhello,world\n", ":2: more fields than the header"),
        ("a.csv", "messages\nnot json\n", ":2: 'messages' is not valid JSON"),
        ("a.jsonl", "\n\n", "no prompts in it"),
    ],
)
def test_custom_file_errors_name_the_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as e:
        load_prompt_file(f)
    assert message in str(e.value)
    if message.startswith(":"):
        assert str(e.value).startswith(f"{f}{message.split(':')[0]}:{message.split(':')[1]}")


def test_missing_prompt_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_prompt_file(tmp_path / "nope.jsonl")
