"""Prompts for trace rows: exactly the row's input length, and shared prefix blocks where the
trace says the rows share them.

Built like `synthetic` (swarm/load/synthetic.py): before the load each worker fits its tokenizer
(`fit_words`: single-token words and the template's fixed cost T), so a prompt of L tokens is the
anchor word plus L - T words, without tokenizing on the request path. The words after the anchor
are laid out block by block: block i of a row is the first words of the text of its hash id
`hash_ids[i]` (`block_size` words, drawn from a random generator seeded by the run's seed and the
hash id, the same on every worker), so two rows that share leading hash ids share exactly that
token prefix, and the server's prefix cache hits it as the trace implies. Rows without hash ids
(Azure, BurstGPT) get blocks of their own (keyed by the row id), shared with no other row.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import time
from collections.abc import Callable

from swarm.core.errors import TargetError
from swarm.core.tokenizer import Tokenizer
from swarm.load.synthetic import Counting, PromptFit, fit_words
from swarm.load.trace import TraceRow

log = logging.getLogger(__name__)

VERIFY_LENGTHS = (1, 100, 700, 1500, 3000)  # prompts counted for real before the load (+ the template)
BLOCK_CACHE = 4096  # block texts kept per process


class TracePrompts:
    """The prompt text of a trace row. `prepare` (once per worker) before `text`."""

    def __init__(self, block_size: int, seed: int) -> None:
        self.block_size = block_size
        self.seed = seed
        self.fit: PromptFit | None = None
        self.short = 0  # rows shorter than the template's own tokens: sent with the shortest prompt
        self._block = functools.lru_cache(maxsize=BLOCK_CACHE)(self._block_words)

    def prepare(
        self,
        tok: Tokenizer,
        *,
        chat: bool = True,
        progress: Callable[[str], None] = log.info,
    ) -> PromptFit:
        """Fit the tokenizer, then count prompts of VERIFY_LENGTHS content tokens for real (rows that
        share their first block, and rows of their own)."""
        t0 = time.perf_counter()
        count = Counting(tok, chat)
        self.fit = fit_words(count)
        bs = self.block_size
        checked = [
            TraceRow(
                -1 - i, 0.0, n + self.fit.overhead, 1, tuple(range(math.ceil((n + 1) / bs))) if i % 2 else ()
            )
            for i, n in enumerate(VERIFY_LENGTHS)
        ]
        for r in checked:
            got = count(self.text(r))
            if got != r.input_tokens:
                raise TargetError(
                    f"tokenizer {tok.name}: the prompt of trace row {r.row} ({r.input_tokens} tokens) counts "
                    f"{got}; this tokenizer does not add up word by word, so exact lengths are not possible"
                )
        progress(
            f"trace prompts ready: tokenizer {tok.name}, template {self.fit.overhead - 1} tokens, "
            f"{len(checked)} rows counted exactly, {time.perf_counter() - t0:.1f} s"
        )
        return self.fit

    def _block_words(self, key: tuple[int, ...]) -> tuple[str, ...]:
        assert self.fit is not None
        rng = random.Random(f"{self.seed}:block:{key}")
        return tuple(rng.choices(self.fit.words, k=self.block_size))

    def text(self, row: TraceRow) -> str:
        """The row's prompt: `row.input_tokens` tokens as the fitted tokenizer counts them."""
        fit = self.fit
        if fit is None:
            raise RuntimeError("TracePrompts.prepare() was not called before the load")
        left = row.input_tokens - fit.overhead
        if left < 0:
            self.short += 1
            return fit.anchor
        bs = self.block_size
        n_blocks = -(-left // bs)
        keys = [(h,) for h in row.hash_ids[:n_blocks]]
        keys += [(-1, row.row, i) for i in range(len(keys), n_blocks)]  # a row's own blocks
        parts = [fit.anchor]
        for key in keys:
            words = self._block(key)[: min(bs, left)]
            left -= len(words)
            parts.append("".join(" " + w for w in words))
        return "".join(parts)


__all__ = ["TracePrompts"]
