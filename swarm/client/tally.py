"""`StreamTally`: what one streamed response said, read chunk by chunk, and the record it fills.

Which chunk carries a generated token, reasoning versus answer, usage and finish reason: the
rules are in swarm/client/dialects.py's docstring (REFERENCE.md §2). `feed` is the per-chunk
fast path (measured: 19 µs a 64-token stream under a running usage); keep it allocation-free.
A stream the dialect misreads is said once per process (swarm/client/mismatch.py): noted only on
chunks that carry no token, checked once per request in `fill`.
"""

from __future__ import annotations

import math
from typing import Any

from swarm.client.dialects import THINK_CLOSE, THINK_OPEN, Dialect, error_message
from swarm.client.mismatch import unread_reasoning, warn_once
from swarm.client.tool_calls import ToolCallAssembler
from swarm.core.errors import BadChunk
from swarm.core.records import RequestRecord

ITL_KEEP = 16384
"""Gaps between token chunks kept exactly per request (the first ones). Beyond them a stream that
does not end (a server that never stops, `--request-deadline` far off) only counts: how many, their
sum and their largest (`RequestRecord.itl_dropped*`), so one request's memory stays bounded. The
seeds' longest answers are a few thousand tokens; 16,384 is 128 KiB of floats in the record file.
The cap is applied by `trim` (every PAUSE_BYTES of body, and at the end), never per chunk."""


class StreamTally:
    """What one streamed response said, read chunk by chunk (no allocations per chunk).

    `feed(obj, t)` takes a parsed chunk and the monotonic time of the read that completed it;
    it returns False for an in-stream error object (message in `error`) and raises `BadChunk`
    for anything that is not a chunk. `fill(record, t0, t_end)` writes the result.
    """

    __slots__ = (
        "_ct",
        "_dialect",
        "_drop_max",
        "_drop_sum",
        "_head",
        "_rfields",
        "_running",
        "_tail",
        "_think",
        "_und_n",
        "_und_t",
        "chat",
        "error",
        "finish_reason",
        "itl",
        "n_reasoning",
        "response_id",
        "t_first",
        "t_first_answer",
        "t_last",
        "timings",
        "token_chunks",
        "unread",
        "usage",
    )

    def __init__(self, dialect: Dialect, chat: bool = True) -> None:
        self._dialect = dialect
        self._rfields = dialect.reasoning_fields
        self.chat = chat
        self._ct = 0  # tokens so far: running usage, or token-carrying chunks
        # a running usage is read only where the dialect asked for one (decided on the first chunk
        # with a usage or a token); elsewhere a chunk's usage counts no token: Ollama's completions
        # carry a zero usage on every chunk when include_usage is asked
        self._running: bool | None = None if dialect.continuous_usage else False
        # 0 undecided, 1 inside merged <think>, 2 answer, 3 just after </think>, 4 reasoning field
        self._think = 0
        self._head = ""  # state 0: leading content while it could still become "<think>"
        self._tail = ""  # state 1: last chars of reasoning content (a tag split across chunks)
        self._und_n = 0  # state 0: tokens not yet known to be reasoning or answer
        self._und_t: float | None = None  # ... and the time of the first of them
        self.t_first: float | None = None
        self.t_first_answer: float | None = None
        self.t_last: float | None = None
        self.itl: list[float] = []  # the first ITL_KEEP gaps; the rest only in _drop_sum, _drop_max
        self._drop_sum = 0.0
        self._drop_max = 0.0
        self.token_chunks = 0
        self.n_reasoning = 0  # reasoning tokens seen in chunks (exact with a running usage)
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.error: str | None = None
        self.unread: str | None = None  # a reasoning field with text the dialect does not read

    # -- per chunk -------------------------------------------------------------------------

    @property
    def tokens_so_far(self) -> int:
        """Generated tokens counted so far (the running usage, else the token-carrying chunks)."""
        return self._ct

    def feed(self, obj: Any, t: float) -> bool:
        if self._think == 2 and self._running and self.chat:
            # Fast path, once the answer runs with a running usage (vLLM): an answer chunk whose
            # delta is only `content` and that does not finish. Same result as the general path
            # below, a third of its cost; anything else falls through to it.
            try:
                choice = obj["choices"][0]
                delta = choice["delta"]
                usage = obj["usage"]
            except (KeyError, TypeError, IndexError):
                pass
            else:
                if (
                    delta.__class__ is dict
                    and len(delta) == 1
                    and delta.get("content") is not None
                    and usage.__class__ is dict
                    and choice.get("finish_reason") is None
                ):
                    self.usage = usage
                    ct = usage.get("completion_tokens") or 0
                    if ct > self._ct:
                        self._ct = ct
                        self.itl.append(t - self.t_last)  # type: ignore[operator]
                        self.t_last = t
                        self.token_chunks += 1
                    return True
        return self.feed_general(obj, t)

    def feed_general(self, obj: Any, t: float) -> bool:
        """`feed` without its fast path (every chunk goes through here but the common one)."""
        try:
            choices = obj["choices"]
        except (KeyError, TypeError, IndexError):
            if isinstance(obj, dict) and ("error" in obj or obj.get("object") == "error"):
                self.error = error_message(obj)
                return False
            raise BadChunk(f"not a completion chunk: {str(obj)[:120]}") from None
        if self.response_id is None:
            self.response_id = obj.get("id")
        usage = obj.get("usage")
        if not choices:
            if usage is not None:
                self.usage = usage
            elif choices is None or choices.__class__ is not list:
                raise BadChunk(f"bad choices: {str(obj)[:120]}")
            return True
        try:
            choice = choices[0]
            fr = choice.get("finish_reason")
            if self.chat:
                delta = choice["delta"]
                content = delta.get("content")
                reasoning = None
                for f in self._rfields:
                    reasoning = delta.get(f)
                    if reasoning is not None:
                        break
                if content or reasoning:
                    fallback_token = True
                else:  # no text the dialect reads: a role or finish chunk, or a field it does not read
                    fallback_token = (content is not None or reasoning is not None) and "role" not in delta
                    if not fallback_token and delta and self.unread is None:
                        self.unread = unread_reasoning(delta, self._rfields)
            else:
                content = choice["text"]
                reasoning = None
                fallback_token = content is not None and (content != "" or fr is None)
        except (KeyError, TypeError, AttributeError, IndexError):
            raise BadChunk(f"malformed choice: {str(obj)[:120]}") from None

        running = self._running
        if running is None and (usage is not None or fallback_token):
            # decided by the first chunk with a usage or a token: SGLang's role chunk has no usage
            running = self._running = usage is not None
        if running:
            if usage is not None:
                ct = usage.get("completion_tokens") or 0
                n = ct - self._ct
                if n > 0:
                    self._ct = ct
                self.usage = usage
            else:  # a running stream's chunk without usage (SGLang's finish chunk): no token
                n = 0
        elif fallback_token:
            n = 1
            self._ct += 1
        else:
            n = 0
            if usage is not None:
                self.usage = usage
        if fr is not None:
            self.finish_reason = fr
            if usage is not None:  # the final usage on the finishing chunk (TGI's completions)
                self.usage = usage
            timings = obj.get("timings")
            if timings is not None:
                self.timings = timings
        if n > 0:
            self._token(t, n, content, reasoning)
        return True

    def _token(self, t: float, n: int, content: str | None, reasoning: str | None) -> None:
        if self.t_first is None:
            self.t_first = t
        else:
            self.itl.append(t - self.t_last)  # type: ignore[operator]
        self.t_last = t
        self.token_chunks += 1
        state = self._think
        if state == 2:  # the common case once the answer runs
            if reasoning:  # reasoning after the answer started (odd, but count it)
                self.n_reasoning += n
            return
        if reasoning is not None and (reasoning or not content):  # a reasoning field
            self.n_reasoning += n
            if content:
                self._answer(t)
            elif state == 0:
                self.n_reasoning += self._und_n
                self._und_n, self._und_t, self._head = 0, None, ""
                self._think = 4
            return
        if content is None:  # tokens without text (running usage): same phase as before
            if state == 1 or state == 4:
                self.n_reasoning += n
            elif state == 3:
                self._answer(t)
            else:
                self._undecided(t, n, "")
            return
        if state == 4:  # content after a reasoning field: the answer starts
            # a multi-token chunk here also carries text-less tokens before the first answer
            # token (vLLM's parser swallows `</think>`): count those as reasoning
            self.n_reasoning += n - 1
            self._answer(t)
            return
        self._content(t, n, content)

    def _answer(self, t: float) -> None:
        if self.t_first_answer is None:
            self.t_first_answer = t
        self._think = 2

    def _undecided(self, t: float, n: int, head: str) -> None:
        self._head = head
        self._und_n += n
        if self._und_t is None:
            self._und_t = t

    def _content(self, t: float, n: int, text: str) -> None:
        """Content before the answer is known to run: look for merged `<think>` tags."""
        state = self._think
        if state == 3:  # first token after </think>
            self._answer(t)
            return
        if state == 1:
            self.n_reasoning += n
            window = self._tail + text
            i = window.find(THINK_CLOSE)
            if i < 0:
                self._tail = window[-(len(THINK_CLOSE) - 1) :]
                return
            self._think = 3
            if window[i + len(THINK_CLOSE) :]:
                self._answer(t)
            return
        # state 0: nothing but whitespace, "" or a prefix of "<think>" seen so far
        head = (self._head + text).lstrip()
        if head.startswith(THINK_OPEN):
            self._think = 1
            self.n_reasoning += n + self._und_n
            self._und_n, self._und_t, self._head = 0, None, ""
            self._tail = ""
            self._content(t, 0, head[len(THINK_OPEN) :])
        elif not head or THINK_OPEN.startswith(head):
            self._undecided(t, n, head)
        else:
            self._answer(self._und_t if self._und_t is not None else t)
            self._und_n, self._und_t, self._head = 0, None, ""

    def trim(self) -> None:
        """Keep the first ITL_KEEP gaps; those after them only add to the dropped sum and maximum.

        Called by the transport every PAUSE_BYTES of body (swarm/client/transport.py) and by
        `fill`, not per chunk: the per-chunk path stays as it was, and between two trims the list
        holds at most the gaps of 256 KiB of events."""
        itl = self.itl
        if len(itl) > ITL_KEEP:
            rest = itl[ITL_KEEP:]
            del itl[ITL_KEEP:]
            self._drop_sum += math.fsum(rest)
            self._drop_max = max(self._drop_max, max(rest))

    # -- per request -----------------------------------------------------------------------

    def fill(self, record: RequestRecord, t0: float, t_end: float) -> None:
        """Write times (relative to the send time `t0`) and token counts into `record`."""
        if self.t_first is not None:
            record.ttft_s = self.t_first - t0
        record.e2e_s = t_end - t0
        if self._und_t is not None and self.t_first_answer is None:  # ended undecided: an answer
            self.t_first_answer = self._und_t
        if self.t_first_answer is not None:
            record.ttfa_s = self.t_first_answer - t0
        self.trim()
        record.itl_s = self.itl
        dropped = self.token_chunks - 1 - len(self.itl)
        if dropped > 0:
            record.itl_dropped = dropped
            record.itl_dropped_sum_s = self._drop_sum
            record.itl_dropped_max_s = self._drop_max
        record.finish_reason = self.finish_reason
        usage = self.usage
        timings = self.timings
        reasoning_from_usage = None
        if usage is not None and usage.get("completion_tokens") is not None:
            record.output_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                record.prompt_tokens = int(usage["prompt_tokens"])
            record.tokens_from_usage = True
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
                reasoning_from_usage = int(details["reasoning_tokens"])
            record.cached_tokens = cached_tokens(usage)
        elif timings is not None and timings.get("predicted_n") is not None:  # llama.cpp
            record.output_tokens = int(timings["predicted_n"])
            if timings.get("prompt_n") is not None:
                record.prompt_tokens = int(timings["prompt_n"]) + int(timings.get("cache_n") or 0)
                if timings.get("cache_n") is not None:
                    record.cached_tokens = int(timings["cache_n"])
            record.tokens_from_usage = True
        else:
            record.output_tokens = self._ct
            record.tokens_from_usage = False
        record.reasoning_tokens = (
            reasoning_from_usage if reasoning_from_usage is not None else self.n_reasoning
        )
        if record.ttft_s is not None and record.output_tokens > 1:
            record.tpot_s = (record.e2e_s - record.ttft_s) / (record.output_tokens - 1)
        if self.unread is not None:
            warn_once(self._dialect, "unread", self.unread)
        if self.finish_reason is not None:  # a stream that ended as the server meant it to
            if self._running is False and self._dialect.continuous_usage:
                warn_once(self._dialect, "no_running_usage")
            if usage is None and timings is None:
                warn_once(self._dialect, "no_usage")


def cached_tokens(usage: dict[str, Any]) -> int | None:
    """`usage.prompt_tokens_details.cached_tokens`: the prompt tokens the server took from its
    prefix / prompt cache. llama.cpp always sends it; vLLM (0.32) only with
    `--enable-prompt-tokens-details`, and then on the final usage chunk alone (a running usage
    leaves it out), 0 included. None when the server did not say: absent is not zero."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        return None
    cached = details.get("cached_tokens")
    return None if cached is None else int(cached)


ANSWER_CHARS_MAX = 1 << 20
"""Characters of a conversation turn's answer kept for the next turn's history (~250 k tokens:
past every context an answer could be carried in). A longer answer is not kept at all (`text` is
None) and its conversation ends (swarm/load/sessions.py `Conversation.answered`)."""


class TextTally(StreamTally):
    """A `StreamTally` that also keeps the answer's text (chat: `delta.content`, not reasoning;
    completions: `text`), for a conversation's history (swarm/load/sessions.py). Only conversation
    turns pay for it: every other request reads the stream with the plain tally. At each `trim`
    the parts since the last one are joined into one string and counted: past ANSWER_CHARS_MAX
    the text is dropped and `text_cut` set."""

    __slots__ = ("_joined", "chars", "parts", "text_cut")

    def __init__(self, dialect: Dialect, chat: bool = True) -> None:
        super().__init__(dialect, chat)
        self.parts: list[str] = []
        self._joined = 0  # parts[:_joined] are joined blocks, counted in `chars`
        self.chars = 0
        self.text_cut = False

    def feed(self, obj: Any, t: float) -> bool:
        ok = StreamTally.feed(self, obj, t)
        try:
            choice = obj["choices"][0]
            text = choice["delta"].get("content") if self.chat else choice.get("text")
        except (KeyError, TypeError, IndexError, AttributeError):
            return ok
        if text:
            self.parts.append(text)
        return ok

    def trim(self) -> None:
        StreamTally.trim(self)
        parts = self.parts
        if self.text_cut:
            parts.clear()
            return
        k = self._joined
        if len(parts) > k:
            block = "".join(parts[k:])
            del parts[k:]
            parts.append(block)
            self._joined = k + 1
            self.chars += len(block)
            if self.chars > ANSWER_CHARS_MAX:
                self.text_cut = True
                parts.clear()

    @property
    def text(self) -> str | None:
        """The answer's text; None when it ran past ANSWER_CHARS_MAX (after `fill`, which trims)."""
        return None if self.text_cut else "".join(self.parts)


class ToolTally(StreamTally):
    """A `StreamTally` that also assembles `delta.tool_calls` (swarm/client/tool_calls.py) and
    times the first tool-call chunk, for an agent's steps only: every other request reads the
    stream with the plain tally, whose per-chunk path is unchanged. A dialect without a running
    usage counts a tool-call chunk as one token, as it counts a content chunk."""

    __slots__ = ("assembler", "t_first_tool")

    def __init__(self, dialect: Dialect, chat: bool = True) -> None:
        super().__init__(dialect, chat)
        self.assembler = ToolCallAssembler()
        self.t_first_tool: float | None = None

    def feed(self, obj: Any, t: float) -> bool:
        try:
            deltas = obj["choices"][0]["delta"].get("tool_calls")
        except (KeyError, TypeError, IndexError, AttributeError):
            deltas = None
        if not deltas:
            return StreamTally.feed(self, obj, t)
        before = self._ct
        ok = StreamTally.feed_general(self, obj, t)
        if self._ct == before and not self._running:  # no running usage: one token, as a content chunk
            self._ct += 1
            self._token(t, 1, None, None)
        if self.t_first_tool is None:
            self.t_first_tool = t
        if not self.assembler.feed(deltas):  # not the protocol's shape: the request's outcome is bad_chunk
            raise BadChunk(f"malformed delta.tool_calls: {str(deltas)[:120]}")
        return ok

    def fill(self, record: RequestRecord, t0: float, t_end: float) -> None:
        StreamTally.fill(self, record, t0, t_end)
        if self.t_first_tool is not None:
            record.ttftc_s = self.t_first_tool - t0
