"""The `synthetic` workload: prompts of exact token lengths, as the server counts them.

`--input-tokens DIST --output-tokens DIST` (swarm/load/dists.py) draw each request's prompt and
output length; the output is forced with `max_tokens` + `ignore_eos`. How a prompt hits its
length exactly without tokenizing on the request path:

- Before the load starts, each worker takes its tokenizer's own tokens (`--tokenizer`: the
  server's, a local one, or the pseudo-tokenizer): it encodes the shipped English corpus, decodes
  the most frequent token ids (one call: ids interleaved with a newline token) and keeps the
  pieces that start a word (a space, then letters). Which of those stay ONE token each when they
  follow one another is counted in batches: a batch of k pieces that counts k tokens more than the
  bare prompt has k such pieces (every piece is at least one token). Byte-level BPE (GPT-2,
  Llama 3, Qwen) and SentencePiece cut text at the space before a word, so a text of n such
  pieces is n tokens in any order, whatever the vocabulary (a 1,000-token BPE whose common words
  are several tokens as well as Qwen's whole words), and the chat template adds a fixed cost T,
  measured once: a prompt of L tokens is an anchor plus L - T pieces. A sample of the drawn
  lengths is then counted for real (one progress line); a tokenizer that does not add up is an
  error, never a silent miss. (vLLM's random dataset decodes random ids and re-encodes each
  prompt; here the round trip is checked once per piece, so no prompt is tokenized on the
  request path.)
- Layout of one prompt: anchor, shared prefix of its group (`--shared-prefix-tokens N
  --prefix-groups K`: K texts of N words, the same on every worker), a marker of a few words
  that encodes (request number, worker) so no prompt is sent twice, then a slice of a long
  random text of pieces (drawn once per worker) to fill the length. The prefix cache can hit only the
  shared prefix: the marker differs from the first word after it.
- Deterministic under `--seed` (lengths, texts, prefixes); without it a random seed is drawn
  once by the master and sent to the workers, so prefixes agree and two runs never share prompts.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import json
import logging
import math
import random
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
from swarm.load.request import LLMRequest

log = logging.getLogger(__name__)

WORD_BATCH = 16  # candidate pieces counted per tokenizer call
MIN_WORDS = 16  # fewer one-token pieces than this: the tokenizer is too small for varied text
MARKER_VALUES = 2**32  # distinct markers wanted (request number x worker index)
WORKER_BITS = 10  # worker index < 1024 in a marker
VERIFY_LENGTHS = 12  # distinct drawn lengths counted for real before the load
BODY_WORDS_MIN = 4096
CORPUS_CHARS = 60_000  # of the shipped English corpus, encoded once to find the frequent token ids
DECODED_IDS = 1024  # the most frequent ids decoded (one call)
CANDIDATES = 256  # word pieces tried, most frequent first
PAIRS_BELOW = 64  # fewer one-token pieces than this: two-token pieces are counted too (one call each)


@functools.cache
def corpus_text() -> str:
    """The English sentences of the shipped RAG corpus as one text (deterministic)."""
    text = resources.files("swarm.load.prompts").joinpath("rag_corpus.jsonl").read_text(encoding="utf-8")
    sentences: list[str] = []
    for line in text.splitlines():
        if line.strip() and (doc := json.loads(line)).get("lang") == "en":
            sentences.extend(doc["sentences"])
    return " ".join(sentences)[:CORPUS_CHARS]


def token_pieces(tok: Tokenizer) -> tuple[tuple[str, int], ...]:
    """Word pieces made of `tok`'s own tokens, most frequent in the shipped corpus first: the corpus
    is encoded and its most frequent ids decoded in one call. A token that decodes to letters gives
    the piece " " + letters (returned without the space) with its expected cost: 1 token when the
    token itself starts with the space, else 2 (the space's token, then it)."""
    counts = Counter(tok.encode(corpus_text()))
    top = sorted(counts, key=lambda i: -counts[i])[:DECODED_IDS]  # stable: ties in first-seen order
    sep = tok.encode("\n")[-1:]
    try:
        parts = tok.decode([*sep, *(x for i in top for x in (i, *sep))]).split("\n") if sep else []
        if len(parts) != len(top) + 2:  # the newline did not cut the text once per id: one id at a time
            parts = ["", *(tok.decode([*sep, i]).removeprefix("\n") for i in top), ""]
    except TargetError as e:
        raise TargetError(
            f"tokenizer {tok.name}: synthetic prompts are built from its decoded token ids, and decoding "
            f"failed ({e}); give --tokenizer PATH (the model's tokenizer.json) instead"
        ) from None
    pieces: dict[str, int] = {}
    for text in parts[1:-1]:
        word, cost = (text[1:], 1) if text.startswith(" ") else (text, 2)
        if word.isalpha() and pieces.get(word, 3) > cost:
            pieces[word] = cost
    return tuple(pieces.items())[:CANDIDATES]


@dataclass(frozen=True)
class PromptFit:
    """How a tokenizer counts the workload's prompts: pieces of one token each and the fixed overhead."""

    tokenizer: str
    chat: bool
    anchor: str
    words: tuple[str, ...]  # pieces whose " " + piece is one token wherever it stands after the anchor
    overhead: int  # tokens of the prompt holding only the anchor (template, anchor, BOS)
    pairs: tuple[str, ...] = ()  # pieces whose " " + piece is two tokens (the space's, then the piece)

    def units(self) -> tuple[tuple[str, int], ...]:
        """Every piece with its cost in tokens."""
        return tuple((w, 1) for w in self.words) + tuple((w, 2) for w in self.pairs)


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
    """The one-token pieces of `count`'s tokenizer and the bare prompt's cost (cached per process)."""
    key = (count.tok.name, count.chat, json.dumps(count.kwargs, sort_keys=True))
    if key in _FITS:
        return _FITS[key]
    cands = token_pieces(count.tok)
    anchor = next((w for w, c in cands[:64] if c == 1 and count(w + " " + w) - count(w) == 1), "x")
    base = count(anchor)
    kept: list[tuple[str, int]] = []

    def take(batch: list[tuple[str, int]]) -> None:
        if count(anchor + "".join(" " + w for w, _ in batch)) - base == sum(c for _, c in batch):
            kept.extend(batch)
        elif len(batch) > 1:
            half = len(batch) // 2
            take(batch[:half])
            take(batch[half:])

    ones = [(w, c) for w, c in cands if c == 1]
    for i in range(0, len(ones), WORD_BATCH):
        take(ones[i : i + WORD_BATCH])  # a sum of pieces of at least one token each: each is one
    if len(kept) < PAIRS_BELOW:  # few one-token pieces: two-token ones too, each counted alone first
        found = {w for w, _ in kept}
        pairs = []
        for w, _ in cands:
            if len(pairs) == PAIRS_BELOW:
                break
            if w not in found and (c := count(anchor + " " + w) - base) in (1, 2):
                pairs.append((w, c))
        for i in range(0, len(pairs), WORD_BATCH):
            take(pairs[i : i + WORD_BATCH])
    words = tuple(w for w, c in kept if c == 1)
    if len(kept) < MIN_WORDS or not words:
        raise TargetError(
            f"tokenizer {count.tok.name}: only {len(kept)} of {len(cands)} word pieces of its tokens count "
            f"what they should one after another ({len(words)} of one token); exact prompt lengths need "
            f"at least {MIN_WORDS}, one of them one token"
        )
    pairs = tuple(w for w, c in kept if c == 2)
    fit = _FITS[key] = PromptFit(count.tok.name, count.chat, anchor, words, base, pairs)
    return fit


@dataclass(frozen=True)
class Prepared:
    """What a worker built before the load: the fit, prefix texts, the long body text."""

    fit: PromptFit
    prefixes: tuple[str, ...]  # one per group; each starts with the anchor
    body: str  # " p p p ..." random pieces
    starts: array  # char offset of piece i in `body` (len(pieces) + 1 entries)
    tokens: array  # tokens before piece i in `body` (len(pieces) + 1 entries)
    marker_words: int
    marker_cost: int  # tokens of a marker (marker_words pieces of one cost)
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
    ) -> None:
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
        units = fit.units()
        shared = random.Random(f"{seed}:prefix")  # the same on every worker
        prefixes = tuple(
            fit.anchor + _exact_text(fit, self.prefix_tokens, shared) for _ in range(self.groups)
        )
        rng = random.Random(f"{seed}:worker:{worker}")
        n_body = max(BODY_WORDS_MIN, 2 * self._typical_max())
        body, starts, tokens = _body_text(units, n_body, rng)
        digits, cost = _marker_digits(fit)
        marker_words = math.ceil(math.log(MARKER_VALUES) / math.log(len(digits)))
        p = Prepared(fit, prefixes, body, starts, tokens, marker_words, marker_words * cost, worker, rng)
        self.prepared = p
        self._sent = 0
        self._check_room(self.input_tokens.low)
        verified = self._verify(count, random.Random(f"{seed}:verify:{worker}"))
        progress(
            f"synthetic prompts ready: tokenizer {tok.name}, {len(fit.words)} one-token and "
            f"{len(fit.pairs)} two-token word pieces, template "
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
        return length - p.fit.overhead - self.prefix_tokens - p.marker_cost

    def _check_room(self, length: int) -> None:
        if self._room(length) < 1:
            p = self.prepared
            assert p is not None
            need = length - self._room(length) + 1
            raise UsageError(
                f"--input-tokens {self.input_tokens} can draw {length} tokens, but the chat template "
                f"and anchor ({p.fit.overhead}), the shared prefix ({self.prefix_tokens}) and the "
                f"unique marker ({p.marker_cost}) take {need - 1}: draw at least {need}"
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
        digits, _ = _marker_digits(p.fit)
        k = len(digits)
        mark = []
        for _ in range(p.marker_words):
            marker, digit = divmod(marker, k)
            mark.append(" " + digits[digit])
        tokens = p.tokens
        if tokens[-1] < n:  # a rare long draw (normal / lognormal tails): a longer body, once
            p = self._grow(n)
            tokens = p.tokens
        # a slice of the body of n or n - 1 tokens (pieces of 1 or 2), then one 1-token piece if short
        last = bisect.bisect_right(tokens, tokens[-1] - n) - 1
        i = p.rng.randint(0, last)
        j = bisect.bisect_right(tokens, tokens[i] + n) - 1
        fill = " " + p.rng.choice(p.fit.words) if tokens[j] - tokens[i] < n else ""
        return p.prefixes[group] + "".join(mark) + p.body[p.starts[i] : p.starts[j]] + fill

    def _grow(self, n: int) -> Prepared:
        p = self.prepared
        assert p is not None
        body, starts, tokens = _body_text(p.fit.units(), 2 * n, p.rng)
        self.prepared = p = dataclasses.replace(p, body=body, starts=starts, tokens=tokens)
        return p

    def next_request(self, rng: random.Random) -> LLMRequest:
        p = self.prepared
        if p is None:
            raise RuntimeError("SyntheticWorkload.prepare() was not called before the load")
        r = p.rng
        length = self.input_tokens.draw(r)
        group = r.randrange(self.groups) if self.groups > 1 else 0
        marker = (self._sent << WORKER_BITS) | (p.worker & ((1 << WORKER_BITS) - 1))
        self._sent += 1
        text = self.prompt_text(length, group, marker)
        return LLMRequest(
            workload=self.name,
            messages=[{"role": "user", "content": text}],
            max_tokens=self.output_tokens.draw(r),
            ignore_eos=self.ignore_eos,
            prompt_tokens=length,  # exact as the tokenizer counts it: kept on a cancelled record
        )


def _marker_digits(fit: PromptFit) -> tuple[tuple[str, ...], int]:
    """The pieces a marker's digits are written with, all of one cost: the larger class."""
    return (fit.words, 1) if len(fit.words) >= max(2, len(fit.pairs)) else (fit.pairs, 2)


def _exact_text(fit: PromptFit, n: int, rng: random.Random) -> str:
    """Random pieces of exactly `n` tokens."""
    units, parts = fit.units(), []
    while n > 0:
        w, c = rng.choice(units) if n > 1 else (rng.choice(fit.words), 1)
        parts.append(" " + w)
        n -= c
    return "".join(parts)


def _body_text(units: tuple[tuple[str, int], ...], n: int, rng: random.Random) -> tuple[str, array, array]:
    """Random pieces of at least `n` tokens; char offset and tokens before each piece."""
    starts, tokens = array("I", [0]), array("I", [0])
    parts: list[str] = []
    while tokens[-1] < n:
        for w, c in rng.choices(units, k=max(1, n - tokens[-1])):
            parts.append(" " + w)
            starts.append(starts[-1] + len(w) + 1)
            tokens.append(tokens[-1] + c)
    return "".join(parts), starts, tokens


__all__ = ["PromptFit", "SyntheticWorkload", "corpus_text", "fit_words", "token_pieces"]
