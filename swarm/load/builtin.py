"""The built-in workloads' definitions: prompt sets drawn uniformly (mixed, short_qa, chat,
long_output, translate, custom) and RAG prompts built to a size with a common prefix (rag).

The registry that names them, and their defaults, is swarm/load/workloads.py; the shipped prompt
sets are data files in swarm/load/prompts/.
"""

from __future__ import annotations

import bisect
import functools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from swarm.load.request import LLMRequest, Messages, Prompt


class ShippedWorkload:
    """What the built-in workloads share: nothing to build before the load."""

    name: str = ""
    needs_tokenizer: bool = False

    def prepare(self, tok: Any, *, chat: bool = True, worker: int = 0, progress: Any = None) -> None:
        """Nothing to build before the load."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class PromptSetWorkload(ShippedWorkload):
    """Prompts drawn uniformly; a `thinking_prompts` pool serves the thinking share (mixed)."""

    def __init__(
        self,
        name: str,
        prompts: Sequence[Prompt],
        max_tokens: tuple[int, int],  # inclusive range; (n, n) for a fixed value
        thinking_ratio: float = 0.0,
        thinking_prompts: Sequence[Prompt] = (),
    ) -> None:
        self.name = name
        self.prompts = prompts
        self.max_tokens = max_tokens
        self.thinking_ratio = thinking_ratio
        self.thinking_prompts = thinking_prompts

    def next_request(self, rng: random.Random) -> LLMRequest:
        thinking = self.thinking_ratio > 0.0 and rng.random() < self.thinking_ratio
        pool = self.thinking_prompts if thinking and self.thinking_prompts else self.prompts
        p = pool[rng.randrange(len(pool))]
        lo, hi = self.max_tokens
        max_tokens = p.max_tokens or (lo if lo == hi else rng.randint(lo, hi))
        return LLMRequest(
            workload=self.name,
            messages=p.messages,
            max_tokens=max_tokens,
            thinking=thinking if p.thinking is None else p.thinking,
            prompt_tokens=p.prompt_tokens,
        )


def _tokens() -> tuple[Callable[[str], int], Callable[[Messages], int]]:
    from swarm.core.tokens import count_chat_tokens, count_tokens

    return count_tokens, count_chat_tokens


RAG_ZH_HEADER = "参考资料:"
RAG_QUESTION = {"zh": "问题:", "en": "Question: "}
PINNED_HEADER = "\n\n常用参考资料(置顶):\n"
NO_PREFIX_RULES = "请根据以上参考资料回答问题。Answer from the reference material above."
RAG_MIN_EXTRA_TOKENS = 40


class RagWorkload(ShippedWorkload):
    """2-3k-token prompts: fixed system preamble + fixed template + retrieved passages + question.

    The system message is the fixed instructions followed by pinned reference notes, cut (at a
    sentence end) so that it is `prefix_share` of the prompt: that part is the same text in every
    request — a shorter cut is a prefix of a longer one — so prefix caching hits it. The user
    message holds `passages` retrieved documents (the one answering the question plus random
    others, each cut to an equal share of what is left; more documents when these are too short
    for the size) and the question. With prefix_share 0 the
    instructions move behind the passages: no common prefix at all.
    """

    name = "rag"

    @property
    def intended_prefix_share(self) -> float | None:
        """The share of each prompt that is the common prefix (None: none, prefix_share 0)."""
        return self.share or None

    def __init__(
        self,
        *,
        passages: int,
        prefix_share: float,
        size: tuple[int, int],  # prompt tokens (estimated), inclusive range
        max_tokens: int,
        thinking_ratio: float,
    ) -> None:
        self.passages = passages
        self.share = prefix_share
        self.size = size
        self.max_tokens = max_tokens
        self.thinking_ratio = thinking_ratio
        self.count, self.count_chat = _tokens()
        preamble = _load_json("rag_preamble.json")
        self.instructions: str = preamble["instructions"]
        self.pinned: list[str] = preamble["pinned"]
        self.docs = _rag_docs()
        self._systems: dict[int, tuple[str, int]] = {}  # pinned count -> (text, tokens)
        # cumulative token counts of the system text with k pinned notes (k = 0..len)
        base = self.count(self.instructions + PINNED_HEADER)
        self._pinned_cum = [base]
        for s in self.pinned:
            self._pinned_cum.append(self._pinned_cum[-1] + self.count(s) + 1)

    def _system(self, target: int) -> tuple[str, int]:
        k = max(0, bisect.bisect_right(self._pinned_cum, target) - 1)
        if k not in self._systems:
            text = self.instructions + PINNED_HEADER + "\n".join(self.pinned[:k]) if k else self.instructions
            self._systems[k] = (text, self.count(text))
        return self._systems[k]

    def next_request(self, rng: random.Random) -> LLMRequest:
        lo, hi = self.size
        total = lo if lo == hi else rng.randint(lo, hi)
        docs = self.docs
        answer_doc = docs[rng.randrange(len(docs))]
        question = RAG_QUESTION[answer_doc.lang] + answer_doc.question
        messages: Messages = []
        used = 3  # reply primer (swarm.core.tokens.CHAT_TOKENS_REPLY_PRIMER)
        if self.share > 0:
            system, n = self._system(round(self.share * total) - 5)
            messages.append({"role": "system", "content": system})
            used += 5 + n  # CHAT_TOKENS_PER_MESSAGE + content
            tail = ""
        else:
            tail = "\n\n" + self.instructions + "\n" + NO_PREFIX_RULES
        # user message: header, "\n\n" + passage (one token of separator each), "\n\n" + question + tail
        used += 5 + self.count(RAG_ZH_HEADER) + 1 + self.count(question) + self.count(tail)
        order = rng.sample(range(len(docs)), len(docs))  # retrieval order: random
        picked = [docs[i] for i in order[: self.passages] if docs[i] is not answer_doc][: self.passages - 1]
        picked.insert(rng.randrange(len(picked) + 1), answer_doc)
        extra = (docs[i] for i in order[self.passages :] if docs[i] is not answer_doc)
        budget = total - used
        parts = [RAG_ZH_HEADER]
        while True:
            i = len(parts) - 1
            if i < len(picked):
                doc = picked[i]
                room = budget // (len(picked) - i)
            elif budget >= RAG_MIN_EXTRA_TOKENS:  # documents too short for the size: retrieve more
                doc = next(extra, None)
                if doc is None:
                    break
                room = budget
            else:
                break
            text, n = doc.cut(i + 1, room - 1, must_keep=1 if doc is answer_doc else 0)
            budget -= n + 1
            parts.append(text)
        user = "\n\n".join(parts) + "\n\n" + question + tail
        messages.append({"role": "user", "content": user})
        thinking = self.thinking_ratio > 0.0 and rng.random() < self.thinking_ratio
        return LLMRequest(
            workload=self.name, messages=messages, max_tokens=self.max_tokens, thinking=thinking
        )


@dataclass(frozen=True, slots=True)
class RagDoc:
    id: str
    lang: str
    title: str
    question: str
    sentences: tuple[str, ...]
    cum_tokens: tuple[int, ...]  # tokens of the first k sentences joined (k = 0..n), title line excluded

    def cut(self, number: int, budget: int, must_keep: int = 0) -> tuple[str, int]:
        """`[number] title` + as many leading sentences as fit in `budget` tokens (estimate)."""
        head = f"[{number}] {self.title}\n"
        room = budget - _count(head)
        k = max(must_keep, bisect.bisect_right(self.cum_tokens, room) - 1)
        k = max(0, min(k, len(self.sentences)))
        sep = "" if self.lang == "zh" else " "
        return head + sep.join(self.sentences[:k]), _count(head) + self.cum_tokens[k]


def _count(text: str) -> int:
    return _tokens()[0](text)


@functools.cache
def _rag_docs() -> tuple[RagDoc, ...]:
    count = _tokens()[0]
    docs = []
    for d in _load_jsonl("rag_corpus.jsonl"):
        cum = [0]  # the joining space of English text merges into the next token: no separator tokens
        for s in d["sentences"]:
            cum.append(cum[-1] + count(s))
        docs.append(
            RagDoc(
                id=d["id"],
                lang=d["lang"],
                title=d["title"],
                question=d["question"],
                sentences=tuple(d["sentences"]),
                cum_tokens=tuple(cum),
            )
        )
    return tuple(docs)


SUMMARY_INSTRUCTION = {
    "zh": "请用约 500 字总结下面这份资料的要点:\n\n",
    "en": "Summarize the key points of the following document in about 400 words:\n\n",
}


@functools.cache
def summary_prompts() -> tuple[Prompt, ...]:
    out = []
    for d in _rag_docs():
        sep = "" if d.lang == "zh" else " "
        text = SUMMARY_INSTRUCTION[d.lang] + d.title + "\n" + sep.join(d.sentences)
        out.append(Prompt(messages=[{"role": "user", "content": text}]))
    return tuple(out)


# -- shipped prompt sets ---------------------------------------------------------------------


def _data_path(name: str) -> Any:
    return resources.files("swarm.load.prompts").joinpath(name)


def _load_json(name: str) -> Any:
    return json.loads(_data_path(name).read_text(encoding="utf-8"))


def _load_jsonl(name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in _data_path(name).read_text(encoding="utf-8").splitlines() if line.strip()
    ]


@functools.cache
def prompt_set(name: str) -> tuple[Prompt, ...]:
    """A shipped single-turn prompt set: short_qa, chat, thinking, translate."""
    return tuple(
        Prompt(messages=[{"role": "user", "content": row["prompt"]}]) for row in _load_jsonl(f"{name}.jsonl")
    )
