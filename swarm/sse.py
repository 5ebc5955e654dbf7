"""SSE byte stream -> event data strings, with sseclient-py doing the parsing.

The input is the raw body as it comes off the socket: an iterable of `bytes` reads that may
split anywhere — inside a `data:` line, between the CR and LF of a CRLF, or inside a multi-byte
UTF-8 character. Reads are stitched as bytes and a line is decoded only once it is complete,
so a character split across reads survives (the incremental part of the decoding); Locust's own
`iter_lines` decodes each read separately and corrupts such characters (REFERENCE.md §4).

One deviation from sseclient-py 1.9: an event still unterminated when the stream ends is
dropped (as the WHATWG EventSource spec says), not dispatched. A cut stream must read as a
cut stream (`truncated`), not as a half JSON document (`bad_chunk`).

Memory stays bounded: an event that grows past `MAX_EVENT_BYTES` without ending (a broken or
hostile server sending one endless line) raises `EventTooLarge` instead of buffering it all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sseclient import SSEClient

DONE = "[DONE]"
"""The data of the OpenAI-style end-of-stream event."""

_EVENT_END = (b"\r\r", b"\n\n", b"\r\n\r\n")
MAX_EVENT_BYTES = 1 << 20
"""The longest SSE event read (1 MiB; a vLLM chunk is ~300 bytes): past it the stream is refused."""


class EventTooLarge(ValueError):
    """An SSE event grew past MAX_EVENT_BYTES without ending."""


class _SSEClient(SSEClient):
    """sseclient-py's parser with spec-conformant end-of-stream handling."""

    def __init__(self, event_source: Iterable[bytes]) -> None:  # skip the per-stream debug log
        self._event_source = event_source
        self._char_enc = "utf-8"
        self._logger = _NULL_LOGGER

    def _read(self) -> Iterator[bytes]:
        data = b""
        for chunk in self._event_source:
            for line in chunk.splitlines(True):
                data += line
                if data.endswith(_EVENT_END):
                    yield data
                    data = b""
            if len(data) > MAX_EVENT_BYTES:  # once per read, not per line
                raise EventTooLarge(f"SSE event larger than {MAX_EVENT_BYTES} bytes without an end")
        # an unterminated trailing event is incomplete: drop it


class _NullLogger:
    """sseclient-py logs every dispatched event at DEBUG; this keeps the per-chunk path free of it."""

    def debug(self, *args: object) -> None:
        pass


_NULL_LOGGER = _NullLogger()


def iter_data(reads: Iterable[bytes]) -> Iterator[str]:
    """Yield the data of each SSE event (multi-line data joined with newlines; comments skipped).

    Events are yielded as soon as the read that completes them arrives, so a caller that notes
    the time of each read knows when each event arrived. Raises `UnicodeDecodeError` on bytes
    that are not UTF-8 and `EventTooLarge` on an event longer than MAX_EVENT_BYTES.
    """
    for event in _SSEClient(reads).events():
        yield event.data
