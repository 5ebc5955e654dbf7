"""swarm/core/tokenizer.py: the pseudo-tokenizer's ids round-trip, and it counts as swarm/core/tokens.py
(the simulator's own rule), so prompts built with it have the length the simulator reports."""

from __future__ import annotations

from swarm.core.tokenizer import PseudoTokenizer
from swarm.core.tokens import count_chat_tokens, count_tokens, tokenize


def test_encode_decode_round_trips_and_ids_are_first_seen_order():
    tok = PseudoTokenizer()
    text = "The cache hit rate, the cache miss rate: ça va?"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(ids) == len(tokenize(text)) == tok.count_prompt(text) == count_tokens(text)
    assert ids[0] == 0 and max(ids) == len(set(tokenize(text))) - 1  # a repeated piece keeps its id
    assert tok.encode("cache cache") == tok.encode("cache cache")  # stable within an instance


def test_chat_counts_are_the_simulators():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    assert PseudoTokenizer().count_chat(messages, {"enable_thinking": False}) == count_chat_tokens(messages)
    assert count_chat_tokens(messages) > count_tokens("Be brief.") + count_tokens("Why is the sky blue?")
