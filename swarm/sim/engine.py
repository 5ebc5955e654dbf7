"""The simulated vLLM engine: continuous batching over a paged KV cache, driven by step time.

Each step is scheduled like vLLM v1's scheduler: running sequences first (one decode token
each, or the next chunk of a chunked prefill), then waiting ones while `max_num_seqs`, the
token budget (`max_num_batched_tokens`) and free KV blocks allow. Prompt blocks are hashed so
a later prompt with the same prefix skips their prefill (prefix caching). When a running
sequence needs a block and none is free, the most recently admitted sequence is preempted:
its blocks are freed and it is recomputed later (vLLM's recompute preemption).

A step lasts `profile.step` seconds for its tokens (fixed weight-read cost + per-token costs);
when it ends every scheduled sequence whose context is complete gets one new token. The
engine knows counts and times only; the HTTP layer turns tokens into text.

The scheduling core (`schedule`/`complete`) is synchronous, so tests and the calibration
tool can drive it on a virtual clock; `run` drives it on the real one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, Protocol

from swarm.sim.profile import Profile

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"
INSTANT_BURST_S = 0.002  # instant profile: run steps this long before letting handlers write


class Observer(Protocol):
    def observe(self, value: float) -> None: ...


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside the engine: its sizes, KV holdings and timestamps (time.time())."""

    id: str
    prompt_tokens: int
    target_tokens: int  # completion tokens it will produce before finishing
    block_hashes: Seq[int] = ()  # hash chain of the prompt's full blocks (prefix caching)
    arrival_time: float = 0.0
    state: str = WAITING
    computed: int = 0  # tokens whose KV is computed
    generated: int = 0  # completion tokens produced so far
    cached_hashes: list[int] = field(default_factory=list)  # shared prompt blocks held
    cached_tokens: int = 0  # prompt tokens found in the prefix cache when first scheduled
    private_blocks: int = 0
    registered: bool = False  # prompt blocks published to the prefix cache
    scheduled_time: float | None = None  # first time scheduled (end of queueing)
    first_token_time: float | None = None
    last_token_time: float | None = None
    finish_time: float | None = None
    preemptions: int = 0
    waiter: Any = None  # a future the HTTP handler awaits; resolved on progress
    tally: ModelCounters | None = None  # the served model's own counters (several models on one engine)
    max_tokens: int = 0  # the request's limit on completion tokens (TGI reserves for it; 0: not given)

    @property
    def held_blocks(self) -> int:
        return len(self.cached_hashes) + self.private_blocks

    @property
    def done(self) -> bool:
        return self.state == FINISHED or self.state == ABORTED


class BlockPool:
    """KV blocks: free count plus a prefix cache of hashed blocks (ref-counted, LRU-evictable)."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.num_free = num_blocks  # unreferenced blocks, including evictable cached ones
        self.refs: dict[int, int] = {}  # hash -> refcount, for every block holding cached content
        self.evictable: OrderedDict[int, None] = OrderedDict()  # refcount-0 cached blocks, LRU first

    @property
    def used(self) -> int:
        return self.num_blocks - self.num_free

    def lookup(self, hashes: Seq[int], limit: int) -> int:
        """How many leading blocks of `hashes` (at most `limit`) are in the cache."""
        n = 0
        refs = self.refs
        for h in hashes[:limit]:
            if h not in refs:
                break
            n += 1
        return n

    def acquire(self, hashes: Seq[int]) -> None:
        for h in hashes:
            if self.refs[h] == 0:
                del self.evictable[h]
                self.num_free -= 1
            self.refs[h] += 1

    def release_hashes(self, hashes: Seq[int]) -> None:
        for h in hashes:
            r = self.refs[h] - 1
            self.refs[h] = r
            if r == 0:
                self.evictable[h] = None
                self.num_free += 1

    def allocate(self, n: int) -> bool:
        """Take `n` fresh blocks, evicting LRU cached blocks if the empty ones run out."""
        if n > self.num_free:
            return False
        empty = self.num_free - len(self.evictable)
        for _ in range(n - empty):
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]
        self.num_free -= n
        return True

    def free(self, n: int) -> None:
        self.num_free += n

    def reset_cache(self) -> bool:
        """Forget every cached block no sequence holds (vLLM's /reset_prefix_cache); False when
        some cached blocks are still held, which stay cached."""
        for h in self.evictable:
            del self.refs[h]
        self.evictable.clear()
        return not self.refs

    def publish(self, h: int) -> bool:
        """Turn one of the caller's private blocks into cached block `h` (False if `h` exists)."""
        if h in self.refs:
            return False
        self.refs[h] = 1
        return True


@dataclass(slots=True)
class StepPlan:
    scheduled: list[tuple[Sequence, int]]
    prefill_tokens: int
    decode_tokens: int
    context_tokens: int

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens


@dataclass(slots=True)
class ModelCounters:
    """One served model's share of the engine's token counters, and its TTFT and ITL observers
    (None: the engine's). Several models (LoRA adapters) share one engine; each counts its own
    sequences."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    itl: Observer | None = None
    ttft: Observer | None = None


@dataclass
class EngineCounters:
    """Monotonic totals exported as vLLM counters."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    steps: int = 0
    prompt_cached: int = 0  # prompt tokens of first-token sequences that came from the cache
    step_seqs: int = 0  # sequences scheduled, summed over steps (llama.cpp's busy slots per decode)
    aborted: int = 0  # sequences dropped before their end (a client gone, an injected fault)


class Engine:
    def __init__(
        self,
        profile: Profile,
        itl: Observer | None = None,
        iteration_tokens: Observer | None = None,
        on_finish: Callable[[Sequence], None] | None = None,
    ) -> None:
        self.profile = profile
        self.bs = profile.block_size
        self.state_blocks = -(-profile.seq_state_tokens // self.bs)
        self.pool = BlockPool(profile.kv_cache_tokens // self.bs)
        self.caching = profile.prefix_caching
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        self.itl = itl
        self.ttft: Observer | None = None  # set by the metrics (SimMetrics), like itl
        self.iteration_tokens = iteration_tokens
        self.on_finish = on_finish
        self._wakeup: asyncio.Future | None = None
        self._closed = False

    # ---- queries -------------------------------------------------------------------------
    @property
    def kv_cache_usage(self) -> float:
        return self.pool.used / self.pool.num_blocks

    def reset_prefix_cache(self) -> bool:
        """Empty the prefix cache (`POST /reset_prefix_cache`); False if blocks in use kept theirs."""
        return self.pool.reset_cache()

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.bs) + self.state_blocks

    # ---- requests in and out ----------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        seq.state = WAITING
        self.waiting.append(seq)
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    def abort(self, seq: Sequence) -> None:
        """Drop a sequence (client gone, injected fault): frees its KV blocks."""
        if seq.state == WAITING:
            try:
                self.waiting.remove(seq)
            except ValueError:
                pass
        elif seq.state == RUNNING:
            self._release(seq)
            self.running.remove(seq)
        else:
            return
        seq.state = ABORTED
        self.counters.aborted += 1
        _notify(seq)

    def _release(self, seq: Sequence) -> None:
        self.pool.release_hashes(seq.cached_hashes)
        self.pool.free(seq.private_blocks)
        seq.cached_hashes = []
        seq.private_blocks = 0

    def _preempt(self, seq: Sequence) -> None:
        self._release(seq)
        self.running.pop()  # the victim is always the tail
        seq.computed = 0
        seq.registered = False
        seq.state = WAITING
        seq.preemptions += 1
        self.waiting.appendleft(seq)
        self.counters.preemptions += 1

    # ---- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan | None:
        """Pick this step's work (and preempt if KV is short); None when there is none."""
        budget = self.profile.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int]] = []
        prefill = decode = context = 0
        running = self.running
        pool = self.pool
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            total = seq.prompt_tokens + seq.generated
            n = total - seq.computed
            if n > budget:
                n = budget
            need = self._blocks_for(seq.computed + n) - seq.held_blocks
            if need > 0:
                if not pool.allocate(need):
                    while True:
                        victim = running[-1]
                        self._preempt(victim)
                        preempted = True
                        if victim is seq or pool.allocate(need):
                            break
                    if seq.state != RUNNING:
                        break
                seq.private_blocks += need
            scheduled.append((seq, n))
            budget -= n
            if seq.generated and n == 1 and seq.computed == total - 1:
                decode += 1
            else:
                prefill += n
            context += seq.computed + n
            i += 1

        waiting = self.waiting
        max_seqs = self.profile.max_num_seqs
        while waiting and budget > 0 and not preempted and len(running) < max_seqs:
            seq = waiting[0]
            total = seq.prompt_tokens + seq.generated
            hit = 0
            if self.caching and seq.block_hashes:
                hit = pool.lookup(seq.block_hashes, (total - 1) // self.bs)
            start = hit * self.bs
            if not self.profile.chunked_prefill and total - start > budget:
                break  # no chunked prefill: the whole prompt waits for a step that holds it
            n = min(total - start, budget)
            need = self._blocks_for(start + n) - hit
            hit_hashes = seq.block_hashes[:hit]
            pool.acquire(hit_hashes)
            if not pool.allocate(need):
                pool.release_hashes(hit_hashes)
                break
            waiting.popleft()
            running.append(seq)
            seq.state = RUNNING
            seq.cached_hashes = list(hit_hashes)
            seq.private_blocks = need
            seq.computed = start
            if seq.scheduled_time is None:
                seq.scheduled_time = now
                seq.cached_tokens = start  # prefix-cache hit at first scheduling (the trace's)
                if self.caching:
                    # vLLM (0.32) counts a lookup at admission, and a preempted request's next
                    # lookups apart (preempted_hits, not exported): prefix_cache_hits adds each
                    # request's first hit once, the `cached_tokens` its usage reports
                    self.counters.prefix_queries += total
                    self.counters.prefix_hits += start
            scheduled.append((seq, n))
            budget -= n
            prefill += n
            context += start + n

        if not scheduled:
            return None
        return StepPlan(scheduled, prefill, decode, context)

    def step_seconds(self, plan: StepPlan) -> float:
        c = self.profile.step
        ub = self.profile.ubatch_tokens
        base = c.base_s * max(1, -(-plan.tokens // ub)) if ub else c.base_s  # one weight read per ubatch
        return (
            base
            + c.decode_token_s * plan.decode_tokens
            + c.prefill_token_s * plan.prefill_tokens
            + c.kv_read_token_s * plan.context_tokens
        )

    def complete(self, plan: StepPlan, now: float) -> None:
        """End a step at `now`: advance KV, emit one token per ready sequence, finish sequences."""
        counters = self.counters
        itl = self.itl
        any_finished = False
        for seq, n in plan.scheduled:
            if seq.state != RUNNING:
                continue  # aborted while the step ran
            seq.computed += n
            if seq.computed < seq.prompt_tokens + seq.generated:
                continue  # chunked prefill not done yet
            if not seq.registered:
                self._register(seq)
            seq.generated += 1
            counters.generation_tokens += 1
            tally = seq.tally
            if tally is not None:
                tally.generation_tokens += 1
            if seq.first_token_time is None:
                seq.first_token_time = now
                counters.prompt_tokens += seq.prompt_tokens
                counters.prompt_cached += seq.cached_tokens
                if tally is not None:
                    tally.prompt_tokens += seq.prompt_tokens
                # vLLM observes time_to_first_token_seconds when the first token is produced
                # (its output processor, per iteration), not when the request finishes: a request
                # counts in the scrape window of its first token, aborted or not.
                obs = self.ttft if tally is None or tally.ttft is None else tally.ttft
                if obs is not None:
                    obs.observe(now - seq.arrival_time)
            else:
                obs = itl if tally is None or tally.itl is None else tally.itl
                if obs is not None:
                    obs.observe(now - seq.last_token_time)
            seq.last_token_time = now
            if seq.generated >= seq.target_tokens:
                seq.state = FINISHED
                seq.finish_time = now
                self._release(seq)
                any_finished = True
                if self.on_finish is not None:
                    self.on_finish(seq)
            _notify(seq)
        if any_finished:
            self.running = [s for s in self.running if s.state == RUNNING]
        counters.steps += 1
        counters.step_seqs += len(plan.scheduled)
        if self.iteration_tokens is not None:
            self.iteration_tokens.observe(plan.tokens)

    def _register(self, seq: Sequence) -> None:
        """Publish the prompt's full blocks to the prefix cache once its prefill is done."""
        seq.registered = True
        if not self.caching:
            return
        for h in seq.block_hashes[len(seq.cached_hashes) :]:
            if seq.private_blocks <= self.state_blocks:
                break
            if self.pool.publish(h):
                seq.private_blocks -= 1
                seq.cached_hashes.append(h)

    # ---- real-time driver ---------------------------------------------------------------------
    async def run(self) -> None:
        """Step forever on the wall clock; steps that end late do not push later ones back."""
        loop = asyncio.get_running_loop()
        instant = self.profile.step.instant
        next_start = loop.time()
        burst_start = time.perf_counter()
        while not self._closed:
            plan = self.schedule(time.time())
            if plan is None:
                self._wakeup = loop.create_future()
                await self._wakeup
                self._wakeup = None
                next_start = loop.time()
                burst_start = time.perf_counter()
                continue
            if instant:
                self.complete(plan, time.time())
                if time.perf_counter() - burst_start > INSTANT_BURST_S:
                    await asyncio.sleep(0)
                    burst_start = time.perf_counter()
                continue
            now = loop.time()
            if next_start < now - 0.05:  # fell far behind (overloaded): restart the schedule
                next_start = now
            end = next_start + self.step_seconds(plan)
            if end > now:
                await asyncio.sleep(end - now)
            next_start = end
            self.complete(plan, time.time())

    def close(self) -> None:
        self._closed = True
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)


def _notify(seq: Sequence) -> None:
    w = seq.waiter
    if w is not None:
        seq.waiter = None
        if not w.done():
            w.set_result(None)


def prompt_block_hashes(pieces: Seq[str], block_size: int, salt: str | None = None) -> tuple[int, ...]:
    """Hash chain over the prompt's full blocks: block i's hash covers tokens [0, (i+1)*block_size).
    `salt` (vLLM's `cache_salt`) goes into the first block's hash, so a salted prompt shares no block
    with the same prompt under another salt or none."""
    out = []
    h = 0 if salt is None else hash(("cache_salt", salt))
    for i in range(0, len(pieces) - block_size + 1, block_size):
        h = hash((h, *pieces[i : i + block_size]))
        out.append(h)
    return tuple(out)
