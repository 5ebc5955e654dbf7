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
from typing import NamedTuple

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


def _add_bins(into: DenseStore, k0: int, bins: list[int]) -> None:
    """Add `bins` (counts for keys k0, k0 + 1, ...; non-zero at both ends) to `into`: `DenseStore.add`
    per key, as one slice sum (the master merges a report's thousands of bins 333 times a second with
    1,000 workers: benchmarks/master_scale.py). `bins` itself is never kept."""
    hi = k0 + len(bins) - 1
    if into.count == 0:
        into.bins, into.offset, into.min_key, into.max_key = list(bins), k0, k0, hi
        into.count = sum(bins)
        return
    if k0 < into.min_key or hi > into.max_key:
        into._extend_range(k0, hi)
    lo = k0 - into.offset
    into.bins[lo : lo + len(bins)] = [
        a + b for a, b in zip(into.bins[lo : lo + len(bins)], bins, strict=True)
    ]
    into.count += sum(bins)


class LatencyRead(NamedTuple):
    """A latency's wire form (swarm/stats/wire.py `LatencyWire`) read and checked, ready to add
    (`LatencyStats.merge_read`): `bins` trimmed of empty ends, `k0` the key of its first."""

    count: int
    sum: float
    zero: int
    min: float
    max: float
    buckets: list[int]
    k0: int
    bins: list[int]


def read_latency(d: LatencyWire) -> LatencyRead:
    """Read `d`; raises ValueError / KeyError / TypeError for a wire of another shape."""
    buckets = [int(n) for n in d["le"]]
    if len(buckets) != len(BUCKETS) + 1:
        raise ValueError(f"bucket layout differs: {len(buckets)} buckets, expected {len(BUCKETS) + 1}")
    bins = [int(n) for n in d["bins"]]
    k0 = int(d["k0"])
    if any(bins):
        first = next(i for i, n in enumerate(bins) if n)
        last = len(bins) - next(i for i, n in enumerate(reversed(bins)) if n)
        if first or last < len(bins):
            bins, k0 = bins[first:last], k0 + first
    else:
        bins = []
    return LatencyRead(
        int(d["n"]), float(d["sum"]), int(d["zero"]), float(d["min"]), float(d["max"]), buckets, k0, bins
    )


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
        if other._count:
            self.merge_read(other._read())

    def _read(self) -> LatencyRead:
        """This distribution as `merge_read` adds it (its bins a copy of the store's span)."""
        store = self._store
        k0, bins = 0, []
        if store.count:
            k0, bins = (
                store.min_key,
                store.bins[store.min_key - store.offset : store.max_key + 1 - store.offset],
            )
        return LatencyRead(
            self._count, self._sum, self._zero_count, self._min, self._max, self._buckets, k0, bins
        )

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
        s.merge_read(read_latency(d))
        return s

    def merge_read(self, w: LatencyRead) -> None:
        """Add a read wire form in, as `merge(from_wire(...))` would, without building its sketch."""
        if w.count == 0:
            return
        self.flush()
        if w.bins:
            _add_bins(self._store, w.k0, w.bins)
        self._zero_count += w.zero
        self._count += w.count
        self._sum += w.sum
        self._min = min(self._min, w.min)
        self._max = max(self._max, w.max)
        self._buckets = [a + b for a, b in zip(self._buckets, w.buckets, strict=True)]
