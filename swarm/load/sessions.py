"""The `chat_session` workload: conversations, one at a time per Locust user.

A user holds a `Conversation`: `--turns DIST` turns (swarm/load/dists.py), `--think-time DIST`
seconds between them (closed loop). Each turn sends the whole history — every earlier user message
and the assistant's *actual* answer to it (its content, not its reasoning, as chat templates keep
it) — plus the new user message, so the prompt grows as it does for a real user and the prefix
cache decides the TTFT. Where the user messages come from:

- `--dataset sharegpt:FILE` (or any `--dataset` with a `messages` column): each conversation of
  the dataset (part 1's loader, swarm/load/dataset.py) replayed turn by turn with its own user
  messages; its number of turns is the dataset's, capped by `--turns` when that is given.
  Turn 1 asks for the dataset's answer length (as the `dataset` workload does); later turns for
  `--max-tokens` (default 256) without ignore_eos.
- otherwise synthetic: each user message is a prompt of part 1's generator (swarm/load/synthetic.py:
  `--input-tokens` / `--output-tokens`, exact lengths, unique markers), so a turn adds
  `--input-tokens` to the history and asks for `--output-tokens`.

A conversation ends after its last turn, after a failed turn (there is no answer to carry on
with), or when the next turn would pass the target's `max_model_len` (prompt estimate + max_tokens):
then the user starts a new one and the cut is counted. The user (swarm/live/user.py) sends the
turns; this module only keeps the history and builds each turn's request.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from swarm.core.errors import UsageError
from swarm.core.tokenizer import Tokenizer
from swarm.core.tokens import CHAT_TOKENS_PER_MESSAGE, count_chat_tokens
from swarm.load.dataset import DatasetWorkload
from swarm.load.dists import Dist
from swarm.load.request import LLMRequest, Messages
from swarm.load.synthetic import SyntheticWorkload

_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)


def answer_content(text: str) -> str:
    """What a chat template keeps of an answer for the history: the content without a leading
    `<think>...</think>` block (a server that merges reasoning into the content)."""
    return _THINK_BLOCK.sub("", text, count=1) if text.lstrip().startswith("<think>") else text


class Conversation:
    """One user's conversation: the history and the turns still to send."""

    __slots__ = (
        "_users",
        "context_tokens",
        "ended",
        "history",
        "id",
        "planned",
        "turn",
        "workload",
    )

    def __init__(
        self,
        workload: str,
        session_id: str,
        planned: int,
        users: Iterator[tuple[str, int, bool, int | None]],  # (text, max_tokens, ignore_eos, prompt tokens)
        history: Messages | None = None,
    ) -> None:
        self.workload = workload
        self.id = session_id
        self.planned = planned
        self._users = users
        self.history: Messages = list(history or [])
        self.turn = 0  # turns answered so far
        self.context_tokens: int | None = None  # last prompt + its answer, as the server counted them
        self.ended = False

    @property
    def done(self) -> bool:
        return self.ended or self.turn >= self.planned

    def next_request(self) -> LLMRequest | None:
        """The next turn's request, or None when the conversation is over."""
        if self.done:
            return None
        nxt = next(self._users, None)
        if nxt is None:
            self.ended = True
            return None
        text, max_tokens, ignore_eos, _ = nxt
        messages = [*self.history, {"role": "user", "content": text}]
        return LLMRequest(
            workload=self.workload, messages=messages, max_tokens=max_tokens, ignore_eos=ignore_eos
        )

    def prompt_estimate(self, request: LLMRequest) -> int:
        """The next prompt's tokens: the last prompt and its answer as the server counted them (the
        pseudo-tokenizer's count before any answer) plus the new user message."""
        new = request.messages[-1]
        if self.context_tokens is None:
            return count_chat_tokens(request.messages)
        return self.context_tokens + CHAT_TOKENS_PER_MESSAGE + count_chat_tokens([new])

    def answered(
        self, request: LLMRequest, answer: str | None, prompt_tokens: int | None, output_tokens: int
    ) -> None:
        """The turn `request` was answered with `answer` (content): it joins the history. None: an
        answer too long to keep (swarm/client/tally.py ANSWER_CHARS_MAX), the conversation ends."""
        if answer is None:
            self.failed()
            return
        self.history = [*request.messages, {"role": "assistant", "content": answer_content(answer)}]
        self.turn += 1
        if prompt_tokens is not None:
            self.context_tokens = prompt_tokens + output_tokens

    def failed(self) -> None:
        """The turn failed: no answer to carry on with, the conversation is over."""
        self.turn += 1
        self.ended = True


class ChatSessionWorkload:
    """Conversations whose user messages come from a dataset or part 1's synthetic generator."""

    name = "chat_session"
    sessions = True  # the user keeps a Conversation (swarm/live/user.py)

    def __init__(
        self,
        turns: Dist,
        think_time: Dist,
        source: DatasetWorkload | SyntheticWorkload,
        *,
        turns_given: bool = True,
        max_tokens: int = 256,
    ) -> None:
        self.turns = turns
        self.think_time = think_time
        self.source = source
        self.turns_given = turns_given
        self.max_tokens = max_tokens
        self._n = 0

    def __repr__(self) -> str:
        return f"<ChatSessionWorkload turns {self.turns} think {self.think_time} from {self.source!r}>"

    @property
    def needs_tokenizer(self) -> bool:
        return self.source.needs_tokenizer

    def prepare(self, tok: Tokenizer, **kwargs: Any) -> object:
        return self.source.prepare(tok, **kwargs)

    def think(self, rng: random.Random) -> float:
        """Seconds the user thinks before its next turn."""
        return self.think_time.draw_real(rng)

    def start(self, rng: random.Random, session_id: str) -> Conversation:
        """A new conversation for one user."""
        planned = self.turns.draw(rng)
        src = self.source
        if isinstance(src, DatasetWorkload):  # a dataset: the row's own user messages
            row = src.next_row()
            users = list(row.user_turns) or [m["content"] for m in row.messages if m.get("role") == "user"]
            history = [m for m in row.messages[:1] if m.get("role") == "system"]
            planned = min(planned, len(users)) if self.turns_given else len(users)
            first = row.output_tokens

            def from_rows() -> Iterator[tuple[str, int, bool, int | None]]:
                for i, text in enumerate(users):
                    if i == 0 and first is not None:
                        yield text, first, True, None
                    else:
                        yield text, self.max_tokens, False, None

            return Conversation(self.name, session_id, planned, from_rows(), history)

        def synthetic() -> Iterator[tuple[str, int, bool, int | None]]:
            while True:
                req = src.next_request(rng)
                yield req.messages[-1]["content"], req.max_tokens, req.ignore_eos, req.prompt_tokens

        return Conversation(self.name, session_id, planned, synthetic())

    def next_request(self, rng: random.Random) -> LLMRequest:
        """A single request (the first turn of a fresh conversation), for callers without sessions."""
        self._n += 1
        conv = self.start(rng, f"single-{self._n}")
        req = conv.next_request()
        if req is None:  # (a user with sessions starts the next conversation instead)
            raise UsageError(f"chat_session: conversation {conv.id} of {self.source!r} has no user message")
        return req


__all__ = ["ChatSessionWorkload", "Conversation", "answer_content"]
