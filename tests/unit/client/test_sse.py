"""swarm.client.sse: SSE byte stream -> event data, whatever the read boundaries."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swarm.client.sse import DONE, MAX_EVENT_BYTES, EventTooLarge, iter_data, iter_payloads

CHUNK = '{"choices":[{"delta":{"content":"中文é😀"}}]}'


def stream(sep: bytes) -> tuple[bytes, list[str]]:
    s = sep.decode()
    text = (
        f": keep-alive comment{s}"
        f"data: {CHUNK}{s}{s}"
        f"event: message{s}id: 7{s}data: first line{s}data:second line{s}{s}"
        f"retry: 100{s}{s}"  # no data: not dispatched
        f"data: [DONE]{s}{s}"
    )
    return text.encode(), [CHUNK, "first line\nsecond line", DONE]


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_one_read(sep: bytes) -> None:
    data, want = stream(sep)
    assert list(iter_data([data])) == want


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_split_at_every_pair_of_positions(sep: bytes) -> None:
    """Three reads, cut anywhere: inside a UTF-8 character, between CR and LF, in `data:`."""
    data, want = stream(sep)
    for i, j in itertools.combinations_with_replacement(range(len(data) + 1), 2):
        assert list(iter_data([data[:i], data[i:j], data[j:]])) == want, (i, j)


def test_one_byte_reads() -> None:
    data, want = stream(b"\n")
    assert list(iter_data([data[k : k + 1] for k in range(len(data))])) == want


def test_a_character_split_across_reads_survives() -> None:
    raw = "data: 你好\n\n".encode()
    cut = raw.index("你".encode()) + 1  # inside the 3-byte character
    assert list(iter_data([raw[:cut], raw[cut:]])) == ["你好"]


def test_events_come_out_as_soon_as_their_read_completes() -> None:
    seen = []

    def reads():
        for r in (b"data: a\n", b"\ndata: b\n\n", b"data: c\n\n"):
            seen.append(r)
            yield r

    out = []
    for ev in iter_data(reads()):
        out.append((ev, len(seen)))
    assert out == [("a", 2), ("b", 2), ("c", 3)]


def test_an_unterminated_event_at_the_end_is_dropped() -> None:
    """A cut stream must not hand a half JSON document to the caller."""
    assert list(iter_data([b'data: {"a": 1}\n\ndata: {"cho'])) == ['{"a": 1}']
    assert list(iter_data([b"data: x\n"])) == []


def test_data_without_a_space_and_empty_lines() -> None:
    assert list(iter_data([b"data:x\n\n\n\ndata: \n\ndata:  y\n\n"])) == ["x", "", " y"]  # as the spec says


def test_not_utf8_raises() -> None:
    with pytest.raises(UnicodeDecodeError):
        list(iter_data([b"data: \xff\xfe\n\n"]))


# -- the fast parser against sseclient-py, the reference it replaced -------------------------

_LINES = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12
    ).flatmap(
        lambda t: st.sampled_from(
            [
                f"data: {t}",
                f"data:{t}",
                f"data:  {t}",
                f": {t}",
                f"id: {t}",
                f"event: {t}",
                f"{t}: x",
                f'data: {{"a": "{t}"}}',
            ]
        )
    ),
    st.sampled_from(["data", "data:", "retry: 100", " ", ":"]),
)
_EVENTS = st.lists(st.lists(_LINES, min_size=1, max_size=4), min_size=1, max_size=6)


def _reference(data: bytes) -> list[str]:
    from sseclient import SSEClient

    return [e.data for e in SSEClient(iter([data])).events()]


@settings(max_examples=400, deadline=None)
@given(
    events=_EVENTS,
    sep=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    blank_lines=st.integers(1, 3),
)
def test_same_events_as_sseclient_whatever_the_reads(
    events: list[list[str]], sep: str, cuts: list[int], blank_lines: int
) -> None:
    """Every stream that ends with a blank line (sseclient-py dispatches an unterminated last
    event, this parser drops it on purpose), cut into reads anywhere."""
    text = "".join(sep.join(lines) + sep * (1 + blank_lines) for lines in events)
    data = text.encode()
    want = _reference(data)
    bounds = sorted({min(c, len(data)) for c in cuts})
    reads = [data[a:b] for a, b in zip([0, *bounds], [*bounds, len(data)], strict=True)]
    assert list(iter_data(reads)) == want
    assert [p.decode() for p in iter_payloads(reads)] == want


def test_an_endless_event_is_refused_however_it_is_cut() -> None:
    """One byte a read or 64 KiB a read: past MAX_EVENT_BYTES without a blank line, it stops
    (and quickly: the carried event grows in place, it is not copied at every read)."""
    for size in (1, 65536):
        line = b"data: " + b"x" * (MAX_EVENT_BYTES + 10)
        reads = (line[i : i + size] for i in range(0, len(line), size))
        with pytest.raises(EventTooLarge):
            list(iter_payloads(reads))
