"""What counts prompt tokens when the swarm builds prompts of exact lengths: the `Tokenizer` protocol.

Three kinds implement it: the pseudo-tokenizer (`PseudoTokenizer`, here: swarm/core/tokens.py's
rule, exact against the simulator), the target's own tokenizer over HTTP (vLLM `/tokenize`,
llama.cpp `/apply-template` + `/tokenize`) and a Hugging Face tokenizer loaded from a local
directory (both in swarm/client/tokenize.py). The load layer builds prompts with whichever it is
given, once per worker before the load starts; nothing counts tokens on the request path.

`count_chat` counts a chat request as the server will (chat template and its kwargs applied, the
reply primer included), so for vLLM `count_chat(messages, kwargs) == usage.prompt_tokens`;
`count_prompt` counts a /v1/completions prompt (special tokens such as BOS included).
`encode` and `decode` map text to the tokenizer's own token ids and back (no special tokens added):
synthetic prompts are built from the pieces of text that token ids decode to (swarm/load/synthetic.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from swarm.core.tokens import count_chat_tokens, count_tokens, tokenize

TOKENIZER_MODES = ("auto", "server", "pseudo")  # or a PATH (tokenizer.json or a tokenizer directory)

Messages = Sequence[Mapping[str, Any]]


class Tokenizer(Protocol):
    """Counts prompt tokens as the target will. `name` says which tokenizer it is (for logs, caches)."""

    name: str

    def count_chat(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> int: ...

    def count_prompt(self, text: str) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class PseudoTokenizer:
    """The deterministic pseudo-tokenizer (swarm/core/tokens.py): exact on the simulator only.
    Its token ids are the pieces' numbers in the order this instance first met them."""

    name = "pseudo"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []

    def count_chat(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> int:
        return count_chat_tokens(messages)

    def count_prompt(self, text: str) -> int:
        return count_tokens(text)

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in tokenize(text):
            if piece not in self._ids:
                self._ids[piece] = len(self._pieces)
                self._pieces.append(piece)
            ids.append(self._ids[piece])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in ids)
