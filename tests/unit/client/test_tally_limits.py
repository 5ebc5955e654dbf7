"""swarm.client.tally: what one streamed request keeps is bounded (issue 25 item 5: an endless
stream's record held 1.89 M floats). At most ITL_KEEP gaps, the rest counted, summed and their
largest kept; a conversation turn's answer text up to ANSWER_CHARS_MAX characters."""

from __future__ import annotations

import pytest

from swarm.client.dialects import DIALECTS
from swarm.client.tally import ANSWER_CHARS_MAX, ITL_KEEP, StreamTally, TextTally
from swarm.core.records import RequestRecord
from swarm.load.sessions import Conversation


def stream(n: int, trim_every: int | None = None) -> tuple[StreamTally, RequestRecord, list[float]]:
    """n one-token chunks under a running usage, gap i+1 ms after chunk i (a role chunk first)."""
    tally = StreamTally(DIALECTS["vllm"], chat=True)
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 0}}  # fmt: skip
    tally.feed(role, 0.0)
    t, gaps = 1.0, []
    for i in range(1, n + 1):
        if i > 1:
            gap = (i % 997) * 1e-6 + 1e-3
            gaps.append(gap)
            t += gap
        obj = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
               "usage": {"prompt_tokens": 5, "completion_tokens": i}}  # fmt: skip
        assert tally.feed(obj, t)
        if trim_every and i % trim_every == 0:
            tally.trim()
    rec = RequestRecord("w", 0.0)
    tally.fill(rec, 0.0, t + 0.01)
    return tally, rec, gaps


@pytest.mark.parametrize("trim_every", [None, 1000, 1])
def test_gaps_past_the_cap_are_counted_not_kept(trim_every) -> None:
    n = ITL_KEEP + 5000
    _, rec, gaps = stream(n, trim_every)
    assert rec.output_tokens == n
    assert len(rec.itl_s) == ITL_KEEP and rec.itl_s == pytest.approx(gaps[:ITL_KEEP])  # the first ones
    assert rec.itl_dropped == n - 1 - ITL_KEEP  # kept + dropped = token chunks - 1
    assert rec.itl_dropped_sum_s == pytest.approx(sum(gaps[ITL_KEEP:]), rel=1e-9)
    assert rec.itl_dropped_max_s == pytest.approx(max(gaps[ITL_KEEP:]), rel=1e-6)


def test_a_stream_within_the_cap_keeps_every_gap_and_drops_none() -> None:
    _, rec, gaps = stream(ITL_KEEP + 1)  # ITL_KEEP gaps: all kept
    assert rec.itl_s == pytest.approx(gaps) and rec.itl_dropped == 0
    assert rec.itl_dropped_sum_s is None and rec.itl_dropped_max_s is None


def answer_stream(n_chunks: int, text: str, trim_every: int) -> TextTally:
    tally = TextTally(DIALECTS["vllm"], chat=True)
    for i in range(1, n_chunks + 1):
        obj = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
               "usage": {"prompt_tokens": 5, "completion_tokens": i}}  # fmt: skip
        tally.feed(obj, float(i))
        if i % trim_every == 0:
            tally.trim()
        # one joined string per trim so far + the parts since the last trim
        assert len(tally.parts) == i // trim_every + i % trim_every
    tally.fill(RequestRecord("w", 0.0), 0.0, n_chunks + 1.0)
    return tally


def test_a_conversation_answer_is_kept_whole_up_to_its_cap() -> None:
    tally = answer_stream(1000, "ab", trim_every=64)
    assert tally.text == "ab" * 1000 and not tally.text_cut
    assert len(tally.parts) == 1000 // 64 + 1 and tally.chars == 2000  # joined at each trim, counted


def test_an_answer_past_the_cap_is_dropped_and_ends_the_conversation() -> None:
    tally = answer_stream(ANSWER_CHARS_MAX // 1000 + 2, "x" * 1000, trim_every=100)
    assert tally.text_cut and tally.text is None and tally.parts == []
    conv = Conversation("chat_session", "s1", planned=5, users=iter([("hi", 8, False, None)] * 5))
    req = conv.next_request()
    assert req is not None
    conv.answered(req, tally.text, 10, 300_000)
    assert conv.done and conv.history == [] and conv.next_request() is None
