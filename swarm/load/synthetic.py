"""The `synthetic` workload: prompts of exact token lengths, as the server counts them.

`--input-tokens DIST --output-tokens DIST` (swarm/load/dists.py) draw each request's prompt and
output length; the output is forced with `max_tokens` + `ignore_eos`. How a prompt hits its
length exactly without tokenizing on the request path:

- Before the load starts, each worker asks its tokenizer (`--tokenizer`: the server's, a local
  one, or the pseudo-tokenizer) which common English words are ONE token with their leading
  space, in batches: a batch of k such words that counts k tokens more than the bare prompt has k
  single-token words (every word is at least one token). Byte-level BPE (GPT-2, Llama 3, Qwen)
  and SentencePiece cut text at the space before a word, so a text of n such words is n tokens
  in any order and the chat template adds a fixed cost T, measured once: a prompt of L tokens
  is an anchor word plus L - T words. A sample of the drawn lengths is then counted for real
  (one progress line); a tokenizer that does not add up is an error, never a silent miss.
- Layout of one prompt: anchor, shared prefix of its group (`--shared-prefix-tokens N
  --prefix-groups K`: K texts of N words, the same on every worker), a marker of a few words
  that encodes (request number, worker) so no prompt is sent twice, then a slice of a long
  random word text (drawn once per worker) to fill the length. The prefix cache can hit only the
  shared prefix: the marker differs from the first word after it.
- Deterministic under `--seed` (lengths, texts, prefixes); without it a random seed is drawn
  once by the master and sent to the workers, so prefixes agree and two runs never share prompts.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import random
import re
import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from swarm.core.errors import TargetError, UsageError
from swarm.core.tokenizer import Tokenizer
from swarm.load.dists import Dist

log = logging.getLogger(__name__)

WORD_BATCH = 16  # candidate words counted per tokenizer call
MIN_WORDS = 16  # fewer single-token words than this: the tokenizer is too small for varied text
MARKER_VALUES = 2**32  # distinct markers wanted (request number x worker index)
WORKER_BITS = 10  # worker index < 1024 in a marker
VERIFY_LENGTHS = 12  # distinct drawn lengths counted for real before the load
BODY_WORDS_MIN = 4096


@functools.cache
def candidate_words() -> tuple[str, ...]:
    """Lower-case English words of the shipped RAG corpus, most frequent first (deterministic)."""
    counts: Counter[str] = Counter()
    text = resources.files("swarm.load.prompts").joinpath("rag_corpus.jsonl").read_text(encoding="utf-8")
    for line in text.splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        if doc.get("lang") == "en":
            for s in doc["sentences"]:
                counts.update(w.lower() for w in re.findall(r"[A-Za-z]{2,10}", s))
    return tuple(sorted(counts, key=lambda w: (-counts[w], w)))


@dataclass(frozen=True)
class PromptFit:
    """How a tokenizer counts the workload's prompts: single-token words and the fixed overhead."""

    tokenizer: str
    chat: bool
    anchor: str
    words: tuple[str, ...]
    overhead: int  # tokens of the prompt holding only the anchor (template, anchor, BOS)


class Counting:
    """One tokenizer in one mode (chat message or completions prompt), with the template kwargs."""

    def __init__(self, tok: Tokenizer, chat: bool, template_kwargs: dict[str, Any] | None = None) -> None:
        self.tok, self.chat, self.kwargs = tok, chat, template_kwargs
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        if self.chat:
            return self.tok.count_chat([{"role": "user", "content": text}], self.kwargs)
        return self.tok.count_prompt(text)


_FITS: dict[tuple[str, bool, str], PromptFit] = {}  # (tokenizer, chat, kwargs) -> fit, per process


def fit_words(count: Counting) -> PromptFit:
    """The single-token words of `count`'s tokenizer and the bare prompt's cost (cached per process)."""
    key = (count.tok.name, count.chat, json.dumps(count.kwargs, sort_keys=True))
    if key in _FITS:
        return _FITS[key]
    cands = candidate_words()
    anchor = next((w for w in cands[:64] if count(w + " " + w) - count(w) == 1), cands[0])
    base = count(anchor)
    words: list[str] = []

    def take(batch: list[str]) -> None:
        if count(anchor + "".join(" " + w for w in batch)) - base == len(batch):
            words.extend(batch)
        elif len(batch) > 1:
            half = len(batch) // 2
            take(batch[:half])
            take(batch[half:])

    for i in range(0, len(cands), WORD_BATCH):
        take([w for w in cands[i : i + WORD_BATCH] if w != anchor])
    if len(words) < MIN_WORDS:
        raise TargetError(
            f"tokenizer {count.tok.name}: only {len(words)} of {len(cands)} common words are one token; "
            f"exact prompt lengths need at least {MIN_WORDS}"
        )
    fit = _FITS[key] = PromptFit(count.tok.name, count.chat, anchor, tuple(words), base)
    return fit


@dataclass(frozen=True)
class Prepared:
    """What a worker built before the load: the fit, prefix texts, the long body text."""

    fit: PromptFit
    prefixes: tuple[str, ...]  # one per group; each starts with the anchor
    body: str  # " w w w ..." random words
    starts: array  # char offset of word i in `body` (len(words) + 1 entries)
    marker_words: int
    worker: int
    rng: random.Random


class SyntheticWorkload:
    """Synthetic prompts of exact lengths. `prepare` (once per worker) before `next_request`."""

    name = "synthetic"
    needs_tokenizer = True

    def __init__(
        self,
        input_tokens: Dist,
        output_tokens: Dist,
        *,
        seed: int | None = None,
        ignore_eos: bool = True,
        shared_prefix_tokens: int = 0,
        prefix_groups: int = 1,
        request: Callable[..., Any],  # LLMRequest (swarm/load/workloads.py, which imports this module)
    ) -> None:
        self._request = request
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.seed = seed
        self.ignore_eos = ignore_eos
        self.prefix_tokens = shared_prefix_tokens
        self.groups = prefix_groups
        self.prepared: Prepared | None = None
        self._sent = 0

    def __repr__(self) -> str:
        return f"<SyntheticWorkload in {self.input_tokens} out {self.output_tokens}>"

    @property
    def intended_prefix_share(self) -> float | None:
        """The share of prompt tokens the shared prefix is meant to be (None: no shared prefix)."""
        if not self.prefix_tokens:
            return None
        d = self.input_tokens
        mean = {"fixed": d.a, "uniform": (d.a + d.b) / 2, "normal": d.a}.get(
            d.kind, d.a * math.exp(d.b**2 / 2)
        )
        return min(1.0, self.prefix_tokens / mean)

    # -- before the load ----------------------------------------------------------------------

    def prepare(
        self,
        tok: Tokenizer,
        *,
        chat: bool = True,
        worker: int = 0,
        progress: Callable[[str], None] = log.info,
    ) -> Prepared:
        t0 = time.perf_counter()
        seed = self.seed if self.seed is not None else random.SystemRandom().getrandbits(62)
        count = Counting(tok, chat)
        fit = fit_words(count)
        words = fit.words
        shared = random.Random(f"{seed}:prefix")  # the same on every worker
        prefixes = tuple(
            fit.anchor + "".join(" " + shared.choice(words) for _ in range(self.prefix_tokens))
            for _ in range(self.groups)
        )
        rng = random.Random(f"{seed}:worker:{worker}")
        n_body = max(BODY_WORDS_MIN, 2 * self._typical_max())
        body, starts = _word_text(words, n_body, rng)
        marker_words = math.ceil(math.log(MARKER_VALUES) / math.log(len(words)))
        p = Prepared(fit, prefixes, body, starts, marker_words, worker, rng)
        self.prepared = p
        self._sent = 0
        self._check_room(self.input_tokens.low)
        verified = self._verify(count, random.Random(f"{seed}:verify:{worker}"))
        progress(
            f"synthetic prompts ready: tokenizer {tok.name}, {len(words)} one-token words, template "
            f"{fit.overhead - 1} tokens, {len(verified)} lengths counted exactly "
            f"({min(verified)}-{max(verified)}), {count.calls} tokenizer calls, "
            f"{time.perf_counter() - t0:.1f} s"
        )
        return p

    def _typical_max(self) -> int:
        d = self.input_tokens
        if d.kind in ("fixed", "uniform"):
            return int(max(d.a, d.b))
        if d.kind == "normal":
            return int(d.a + 4 * d.b)
        return int(d.a * math.exp(3 * d.b))

    def _room(self, length: int) -> int:
        """Body words of a prompt of `length` tokens (after anchor, prefix and marker)."""
        p = self.prepared
        assert p is not None
        return length - p.fit.overhead - self.prefix_tokens - p.marker_words

    def _check_room(self, length: int) -> None:
        if self._room(length) < 1:
            p = self.prepared
            assert p is not None
            need = length - self._room(length) + 1
            raise UsageError(
                f"--input-tokens {self.input_tokens} can draw {length} tokens, but the chat template "
                f"and anchor ({p.fit.overhead}), the shared prefix ({self.prefix_tokens}) and the "
                f"unique marker ({p.marker_words}) take {need - 1}: draw at least {need}"
            )

    def _verify(self, count: Counting, rng: random.Random) -> list[int]:
        """Count prompts of a sample of drawn lengths for real: each must be exactly its length."""
        lengths = {self.input_tokens.draw(rng) for _ in range(4 * VERIFY_LENGTHS)}
        d = self.input_tokens
        if d.kind in ("fixed", "uniform"):
            lengths |= {int(d.a), int(max(d.a, d.b))}
        chosen = sorted(lengths)
        if len(chosen) > VERIFY_LENGTHS:
            step = (len(chosen) - 1) / (VERIFY_LENGTHS - 1)
            chosen = sorted({chosen[round(i * step)] for i in range(VERIFY_LENGTHS)})
        for n in chosen:
            self._check_room(n)
            text = self.prompt_text(n, group=rng.randrange(self.groups), marker=rng.getrandbits(32))
            got = count(text)
            if got != n:
                raise TargetError(
                    f"tokenizer {count.tok.name}: a prompt built for {n} tokens counts {got}; "
                    "this tokenizer does not add up word by word, so exact lengths are not possible"
                )
        return chosen

    # -- per request (no tokenizer) -------------------------------------------------------------

    def prompt_text(self, length: int, group: int, marker: int) -> str:
        p = self.prepared
        assert p is not None
        n = self._room(length)
        if n < 1:
            self._check_room(length)
        words = p.fit.words
        k = len(words)
        mark = []
        for _ in range(p.marker_words):
            marker, digit = divmod(marker, k)
            mark.append(" " + words[digit])
        starts = p.starts
        total = len(starts) - 1
        if n > total:  # a rare long draw (normal / lognormal tails): a longer body, once
            p = self._grow(n)
            starts, total = p.starts, len(p.starts) - 1
        i = p.rng.randrange(total - n + 1)
        return p.prefixes[group] + "".join(mark) + p.body[starts[i] : starts[i + n]]

    def _grow(self, n: int) -> Prepared:
        p = self.prepared
        assert p is not None
        body, starts = _word_text(p.fit.words, 2 * n, p.rng)
        self.prepared = p = Prepared(p.fit, p.prefixes, body, starts, p.marker_words, p.worker, p.rng)
        return p

    def next_request(self, rng: random.Random) -> Any:
        p = self.prepared
        if p is None:
            raise RuntimeError("SyntheticWorkload.prepare() was not called before the load")
        r = p.rng
        length = self.input_tokens.draw(r)
        group = r.randrange(self.groups) if self.groups > 1 else 0
        marker = (self._sent << WORKER_BITS) | (p.worker & ((1 << WORKER_BITS) - 1))
        self._sent += 1
        text = self.prompt_text(length, group, marker)
        return self._request(
            self.name,
            [{"role": "user", "content": text}],
            self.output_tokens.draw(r),
            None,
            self.ignore_eos,
            prompt_tokens=length,  # exact as the tokenizer counts it: kept on a cancelled record
        )


def _word_text(words: tuple[str, ...], n: int, rng: random.Random) -> tuple[str, array]:
    picked = rng.choices(words, k=n)
    starts = array("I", [0])
    pos = 0
    for w in picked:
        pos += len(w) + 1
        starts.append(pos)
    return "".join(" " + w for w in picked), starts


__all__ = ["PromptFit", "SyntheticWorkload", "candidate_words", "fit_words"]


__all__ = ["PromptFit", "SyntheticWorkload", "candidate_words", "fit_words"]
