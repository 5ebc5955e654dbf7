"""One latency's distribution, mergeable: DDSketch bins + exact count/sum/min/max + Prometheus buckets.

Each latency (TTFT, TTFA, ITL, TPOT, E2E, send lag) of an aggregate cell (swarm/stats/aggregate.py)
keeps a `LatencyStats`: the `ddsketch` package's LogarithmicMapping + DenseStore at relative
accuracy `REL_ACCURACY`, whose bin counts merge exactly, so the percentiles of a merged sketch are
those of one sketch fed every value. The estimate is within `REL_ACCURACY` of the exact
nearest-rank-lower percentile (swarm/stats/quantiles.py), clamped to the exact min/max. Beside it:
exact count, sum, min and max, and non-cumulative counts on `BUCKETS` (every vLLM bucket bound,
swarm/core/buckets.py, plus finer ones), so /metrics histograms are exact counts.

Cost: ITL arrives at 100k+ values/s per worker. `DDSketch.add` costs ~400 ns a value in pure
Python, so values are appended to a list (~8 ns) and bulk-inserted with numpy (keys via the same
log mapping, `np.unique` counts, then `store.add(key, count)` per distinct key: ~30 ns a value)
when the sketch is read, merged, shipped, or the list reaches `FLUSH_AT`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from ddsketch.mapping import LogarithmicMapping
from ddsketch.store import DenseStore

from swarm.core.buckets import VLLM_E2E_BUCKETS, VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS
from swarm.stats.wire import LatencyWire

REL_ACCURACY = 0.005  # half the 1% the issue allows: room for float noise at bucket edges
FLUSH_AT = (
    8192  # pending values per latency before a bulk insert (~0.3 ms a flush: a short pause of the loop)
)

# Finer steps where per-token latencies live (a 5090 streams a token every ~12-20 ms).
EXTRA_BUCKETS = (0.0025, 0.0075, 0.0125, 0.015, 0.0175, 0.03, 0.035, 0.045, 0.6, 0.7, 0.9, 3.0, 4.0)
BUCKETS: tuple[float, ...] = tuple(
    sorted({*VLLM_TTFT_BUCKETS, *VLLM_ITL_BUCKETS, *VLLM_E2E_BUCKETS, *EXTRA_BUCKETS})
)
_BUCKET_ARRAY = np.asarray(BUCKETS, dtype=np.float64)
_MAPPING = LogarithmicMapping(REL_ACCURACY)
_MULTIPLIER = 1.0 / math.log2(_MAPPING.gamma)  # LogarithmicMapping.key(v) = ceil(log2(v) * this)


def bucket_keys(values: np.ndarray) -> np.ndarray:
    """DDSketch keys of positive values, vectorised (same formula as LogarithmicMapping.key)."""
    return np.ceil(np.log2(values) * _MULTIPLIER).astype(np.int64)


def _merge_store(into: DenseStore, other: DenseStore) -> None:
    """`DenseStore.merge`, its per-key loop as one slice sum (the master merges a report's
    thousands of bins 85 times a second with 256 workers: benchmarks/master_scale.py)."""
    if other.count == 0:
        return
    if into.count == 0:
        into.copy(other)
        return
    if other.min_key < into.min_key or other.max_key > into.max_key:
        into._extend_range(other.min_key, other.max_key)
    lo, hi = other.min_key - into.offset, other.max_key + 1 - into.offset
    theirs = other.bins[other.min_key - other.offset : other.max_key + 1 - other.offset]
    into.bins[lo:hi] = [a + b for a, b in zip(into.bins[lo:hi], theirs, strict=True)]
    into.count += other.count


class LatencyStats:
    """One latency's distribution: sketch bins, exact count/sum/min/max and Prometheus buckets."""

    __slots__ = ("_buckets", "_count", "_max", "_min", "_pending", "_store", "_sum", "_zero_count")

    def __init__(self) -> None:
        self._pending: list[float] = []
        self._store = DenseStore()
        self._zero_count = 0  # values too small for the log mapping (0.0)
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._buckets = [0] * (len(BUCKETS) + 1)  # non-cumulative; last = above the largest bound

    # Readers see every value added so far: each accessor bulk-inserts what is pending first.
    @property
    def count(self) -> int:
        self.flush()
        return self._count

    @property
    def sum(self) -> float:
        self.flush()
        return self._sum

    @property
    def min(self) -> float:
        self.flush()
        return self._min

    @property
    def max(self) -> float:
        self.flush()
        return self._max

    @property
    def zero_count(self) -> int:
        self.flush()
        return self._zero_count

    @property
    def buckets(self) -> list[int]:
        """Non-cumulative counts per bucket of BUCKETS, then one for values above the last bound."""
        self.flush()
        return list(self._buckets)

    def add(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= FLUSH_AT:
            self.flush()

    def extend(self, values: Iterable[float]) -> None:
        self._pending.extend(values)
        if len(self._pending) >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        """Bulk-insert pending values (idempotent; every reader calls it first)."""
        if not self._pending:
            return
        a = np.asarray(self._pending, dtype=np.float64)
        self._pending = []
        a = a[np.isfinite(a)]
        if a.size == 0:
            return
        np.maximum(a, 0.0, out=a)  # a clock step backwards is not a negative latency
        self._count += int(a.size)
        self._sum += float(np.sum(a))
        self._min = min(self._min, float(a.min()))
        self._max = max(self._max, float(a.max()))
        idx = np.searchsorted(_BUCKET_ARRAY, a, side="left")  # first bound >= v: Prometheus `le`
        for i, n in enumerate(np.bincount(idx, minlength=len(BUCKETS) + 1).tolist()):
            if n:
                self._buckets[i] += n
        positive = a[a > _MAPPING.min_possible]
        self._zero_count += int(a.size - positive.size)
        if positive.size:
            keys, counts = np.unique(bucket_keys(positive), return_counts=True)
            for k, n in zip(keys.tolist(), counts.tolist(), strict=True):
                self._store.add(k, n)

    def quantile(self, q: float) -> float | None:
        """Estimate of the nearest-rank-lower q-quantile (within REL_ACCURACY); None when empty."""
        self.flush()
        if self._count == 0:
            return None
        rank = q * (self._count - 1)
        if rank < self._zero_count:
            return 0.0
        value = _MAPPING.value(self._store.key_at_rank(rank - self._zero_count))
        return min(max(value, self._min), self._max)  # exact bounds only move it closer

    def count_above(self, value: float) -> int:
        """Values above `value`, read from the sketch's bins: values in the bin that holds `value`
        (within REL_ACCURACY of it) count as not above."""
        self.flush()
        if self._count == 0 or value >= self._max:
            return 0
        if value < self._min:
            return self._count
        store = self._store
        if value <= _MAPPING.min_possible:
            return int(store.count)
        lo = max(_MAPPING.key(value) + 1, store.min_key)
        if store.count == 0 or lo > store.max_key:
            return 0
        return int(sum(store.bins[lo - store.offset : store.max_key + 1 - store.offset]))

    @property
    def mean(self) -> float | None:
        self.flush()
        return self._sum / self._count if self._count else None

    def cumulative_buckets(self) -> list[tuple[float, int]]:
        """[(upper bound, count of values <= bound)] ending with (+inf, count): a Prometheus histogram."""
        self.flush()
        out, running = [], 0
        for bound, n in zip((*BUCKETS, math.inf), self._buckets, strict=True):
            running += n
            out.append((bound, running))
        return out

    def merge(self, other: LatencyStats) -> None:
        other.flush()
        self.flush()
        if other._count == 0:
            return
        _merge_store(self._store, other._store)
        self._zero_count += other._zero_count
        self._count += other._count
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self._buckets = [a + b for a, b in zip(self._buckets, other._buckets, strict=True)]

    def to_wire(self) -> LatencyWire:
        self.flush()
        store = self._store
        if store.count:
            lo, hi = store.min_key - store.offset, store.max_key - store.offset
            k0, bins = store.min_key, [int(b) for b in store.bins[lo : hi + 1]]
        else:
            k0, bins = 0, []
        return {
            "n": self._count,
            "sum": self._sum,
            "min": self._min,
            "max": self._max,
            "zero": self._zero_count,
            "k0": k0,
            "bins": bins,
            "le": list(self._buckets),
        }

    @classmethod
    def from_wire(cls, d: LatencyWire) -> LatencyStats:
        s = cls()
        if len(d["le"]) != len(s._buckets):
            raise ValueError(f"bucket layout differs: {len(d['le'])} buckets, expected {len(s._buckets)}")
        s._count, s._sum, s._zero_count = int(d["n"]), float(d["sum"]), int(d["zero"])
        s._min, s._max = float(d["min"]), float(d["max"])
        s._buckets = [int(n) for n in d["le"]]
        bins = [int(n) for n in d["bins"]]
        if any(bins):  # the store as DenseStore.copy sets it: one list, not an add (and a range step) per key
            first = next(i for i, n in enumerate(bins) if n)
            last = len(bins) - next(i for i, n in enumerate(reversed(bins)) if n)
            store, k0 = s._store, int(d["k0"])
            store.bins, store.offset = bins[first:last], k0 + first
            store.min_key, store.max_key = k0 + first, k0 + last - 1
            store.count = sum(bins)
        return s
