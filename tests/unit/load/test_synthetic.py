"""The synthetic workload: every prompt is exactly its drawn length by the tokenizer it was built
with (the pseudo-tokenizer, and the shipped tiny model's real BPE tokenizer loaded locally), no
prompt twice, deterministic under a seed, shared prefixes equal across workers."""

from __future__ import annotations

import random

import pytest

from swarm.client.tokenize import LocalTokenizer
from swarm.core.errors import TargetError, UsageError
from swarm.core.tokenizer import PseudoTokenizer
from swarm.load.workloads import Knobs, build
from tests.helpers.bpe import train_small_bpe
from tests.helpers.support import REPO

TINY = REPO / "swarm" / "models" / "tiny-qwen2"


def synthetic(tok, worker: int = 0, **knobs):
    w = build("synthetic", Knobs(**knobs))
    lines: list[str] = []
    w.prepare(tok, worker=worker, progress=lines.append)
    assert len(lines) == 1 and "synthetic prompts ready" in lines[0]
    return w


@pytest.mark.parametrize("tok", [PseudoTokenizer(), LocalTokenizer(TINY)], ids=["pseudo", "tiny-qwen2"])
def test_every_prompt_has_its_drawn_length(tok):
    w = synthetic(tok, input_tokens="40-400", output_tokens="5-9", seed=3)
    reqs = [w.next_request(random.Random()) for _ in range(300)]
    lengths = [tok.count_chat(r.messages) for r in reqs]
    assert min(lengths) >= 40 and max(lengths) <= 400 and len(set(lengths)) > 150
    # the lengths are the drawn ones: the same seed redraws them without any tokenizer
    again = synthetic(tok, input_tokens="40-400", output_tokens="5-9", seed=3)
    assert [again.next_request(random.Random()).messages for _ in range(300)] == [r.messages for r in reqs]
    assert {r.max_tokens for r in reqs} <= set(range(5, 10)) and all(r.ignore_eos for r in reqs)
    texts = [r.messages[0]["content"] for r in reqs]
    assert len(set(texts)) == len(texts)  # never the same prompt twice
    assert len(set(texts[0].split())) > 20  # varied text, not one token repeated


def test_completions_prompts_count_with_special_tokens():
    tok = LocalTokenizer(TINY)
    w = build("synthetic", Knobs(input_tokens="64", seed=1))
    w.prepare(tok, chat=False, progress=lambda _: None)
    for _ in range(20):
        assert tok.count_prompt(w.next_request(random.Random()).messages[0]["content"]) == 64


def test_seed_changes_texts_and_workers_share_prefixes():
    tok = PseudoTokenizer()
    kw = dict(input_tokens="200", shared_prefix_tokens=100, prefix_groups=3, seed=11)
    a, b = synthetic(tok, worker=0, **kw), synthetic(tok, worker=1, **kw)
    pa, pb = a.prepared, b.prepared
    assert pa.prefixes == pb.prefixes and len(set(pa.prefixes)) == 3
    other = synthetic(tok, worker=0, **{**kw, "seed": 12})
    assert other.prepared.prefixes != pa.prefixes
    texts = [w.next_request(random.Random()).messages[0]["content"] for w in (a, b) for _ in range(50)]
    assert len(set(texts)) == 100  # workers never send each other's prompts
    assert all(any(t.startswith(p) for p in pa.prefixes) for t in texts)
    assert a.intended_prefix_share == pytest.approx(0.5)


def test_a_length_below_the_template_cost_is_a_usage_error():
    with pytest.raises(UsageError, match=r"--input-tokens 5-50 can draw 5 tokens.*draw at least"):
        synthetic(PseudoTokenizer(), input_tokens="5-50")
    with pytest.raises(UsageError, match="shared prefix"):
        synthetic(PseudoTokenizer(), input_tokens="100", shared_prefix_tokens=100)


def test_next_request_before_prepare_says_so():
    w = build("synthetic", Knobs())
    with pytest.raises(RuntimeError, match="prepare"):
        w.next_request(random.Random())


@pytest.fixture(scope="module")
def small_bpe(tmp_path_factory):
    return LocalTokenizer(train_small_bpe(tmp_path_factory.mktemp("bpe")))


def test_a_1000_token_bpe_without_one_token_words_gets_exact_prompts(small_bpe):
    """Issue 25 item 6: common English words are several tokens in this BPE (the word list found 0 of
    245), yet prompts built from its own token pieces are exactly the asked lengths and round-trip."""
    tok = small_bpe
    assert tok.tok.get_vocab_size() == 1000
    assert sum(len(tok.encode(" " + w)) == 1 for w in ("the", "of", "and", "that", "with", "for")) <= 2
    for chat in (True, False):
        w = build(
            "synthetic", Knobs(input_tokens="64-1024", seed=5, shared_prefix_tokens=20, prefix_groups=2)
        )
        w.prepare(tok, chat=chat, progress=lambda _: None)
        for n in (64, 257, 1024):
            text = w.prompt_text(n, group=n % 2, marker=n * 7919)
            ids = tok.encode(text)
            assert tok.encode(tok.decode(ids)) == ids  # the text round-trips through the tokenizer
            got = tok.count_chat([{"role": "user", "content": text}]) if chat else tok.count_prompt(text)
            assert got == n, (chat, n, got)
        prefixes = w.prepared.prefixes
        reqs = [w.next_request(random.Random()) for _ in range(200)]
        for r in reqs:
            text = r.messages[0]["content"]
            got = tok.count_chat(r.messages) if chat else tok.count_prompt(text)
            assert got == r.prompt_tokens and 64 <= got <= 1024
            assert any(text.startswith(p) for p in prefixes)
        assert len({r.messages[0]["content"] for r in reqs}) == 200
    # the shared prefix is exactly its tokens after the anchor
    anchor = w.prepared.fit.anchor
    assert all(len(tok.encode(p)) - len(tok.encode(anchor)) == 20 for p in prefixes)


def test_a_tokenizer_that_cannot_decode_is_named_with_the_way_out():
    class NoDecode(PseudoTokenizer):
        name = "server:vllm:no-detokenize"

        def decode(self, ids):
            raise TargetError("POST /detokenize: HTTP 404 Not Found")

    with pytest.raises(TargetError, match=r"no-detokenize: .*decoded token ids.*HTTP 404.*--tokenizer PATH"):
        synthetic(NoDecode(), input_tokens="100")
