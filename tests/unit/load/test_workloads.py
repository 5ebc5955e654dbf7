"""swarm.load.workloads: the registry of workloads, their defaults and knobs, weighted mixes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from swarm.core.errors import UsageError
from swarm.load.workloads import WORKLOADS, Knobs, Mix, build, parse_mix, parse_token_range

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
