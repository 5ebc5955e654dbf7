"""swarm.sse: SSE byte stream -> event data, whatever the read boundaries."""

from __future__ import annotations

import itertools

import pytest

from swarm.sse import DONE, iter_data

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
