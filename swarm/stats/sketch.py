"""One latency's distribution, mergeable: DDSketch bins + exact count/sum/min/max + Prometheus buckets.

Each latency (TTFT, TTFA, ITL, TPOT, E2E, send lag) of an aggregate cell (swarm/stats/aggregate.py)
keeps a `LatencyStats`: the `ddsketch` package's LogarithmicMapping at relative accuracy
`REL_ACCURACY` and the counts per key (`KeyCounts`: ddsketch's DenseStore as one numpy array),
whose bins merge exactly, so the percentiles of a merged sketch are those of one sketch fed every
value. The estimate is within `REL_ACCURACY` of the exact
nearest-rank-lower percentile (swarm/stats/quantiles.py), clamped to the exact min/max. Beside it:
exact count, sum, min and max, and non-cumulative counts on `BUCKETS` (every vLLM bucket bound,
swarm/core/buckets.py, plus finer ones), so /metrics histograms are exact counts.

Cost: ITL arrives at 100k+ values/s per worker. `DDSketch.add` costs ~400 ns a value in pure
Python, so values are appended to a list (~8 ns) and bulk-inserted with numpy (keys via the same
log mapping, `np.unique` counts, added to the store's array at once) when the sketch is read,
merged, shipped, or the list reaches `FLUSH_AT`. On the wire the bins are bytes (`WIRE_WIDTHS`:
unsigned counts, 1, 2, 4 or 8 bytes each as the largest needs), read back with one
`np.frombuffer`: a report's 50,000 bins as a msgpack list of ints took the master milliseconds to
decode alone, and the bytes are no bigger.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from ddsketch.mapping import LogarithmicMapping

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


_NO_BINS = np.zeros(0, dtype=np.int64)
WIRE_WIDTHS = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
# a sketch's bins on the wire: little-endian unsigned counts as bytes, each as wide as the largest needs
GROW = 64  # spare keys on each side when a store's array grows (latencies drift a few keys)
KEYS = (_MAPPING.key(_MAPPING.min_possible), _MAPPING.key(_MAPPING.max_possible))  # every finite value's


class KeyCounts:
    """A DDSketch store (counts per key of the log mapping) as one numpy int64 array: ddsketch's own
    `DenseStore` keeps a Python list and adds key by key, and the master adds whole reports (at
    1,000 workers 333 a second, a worst-case one 50,000 bins: 12.9 ms each read and added key by key
    into the list, 0.9 ms with one array add; benchmarks/master_scale.py). Keys `offset` .. `offset + len(bins) - 1`
    are held; counts are non-zero only in `min_key` .. `max_key`, and `count` is their sum. Its
    `key_at_rank` is the library's (tests/unit/stats/test_sketch_merge.py holds them equal)."""

    __slots__ = ("bins", "count", "max_key", "min_key", "offset")

    def __init__(self) -> None:
        self.bins = _NO_BINS  # (shared while empty: every add makes a store its own array)
        self.count = 0
        self.offset = 0
        self.min_key = 0
        self.max_key = -1

    def add_counts(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Add `counts` at `keys` (sorted, distinct: `np.unique`'s)."""
        self._cover(int(keys[0]), int(keys[-1]))
        self.bins[keys - self.offset] += counts
        self.count += int(counts.sum())

    def add_span(self, k0: int, span: np.ndarray) -> None:
        """Add `span`, the counts of keys k0, k0 + 1, ... (never kept: added into this store's own)."""
        n = int(span.sum())  # (before the add: `span` may be a view of this store, merged into itself)
        self._cover(k0, k0 + len(span) - 1)
        lo = k0 - self.offset
        self.bins[lo : lo + len(span)] += span
        self.count += n

    def span(self) -> tuple[int, np.ndarray]:
        """(min_key, a view of the counts from min_key to max_key); (0, empty) when empty."""
        if not self.count:
            return 0, _NO_BINS
        return self.min_key, self.bins[self.min_key - self.offset : self.max_key + 1 - self.offset]

    def key_at_rank(self, rank: float) -> int:
        """The lowest key whose running count exceeds `rank` (DenseStore.key_at_rank, lower=True)."""
        _, counts = self.span()
        i = int(np.searchsorted(np.cumsum(counts), rank, side="right"))
        return self.min_key + i if i < len(counts) else self.max_key

    def count_from(self, key: int) -> int:
        """The counts at `key` and above."""
        lo = max(key, self.min_key)
        if not self.count or lo > self.max_key:
            return 0
        return int(self.bins[lo - self.offset : self.max_key + 1 - self.offset].sum())

    def _cover(self, lo: int, hi: int) -> None:
        """Hold keys lo..hi too: a bigger array (GROW spare keys each side) when they fall outside."""
        if self.count:
            lo, hi = min(lo, self.min_key), max(hi, self.max_key)
        if lo < self.offset or hi >= self.offset + len(self.bins):
            grown = np.zeros(hi - lo + 1 + 2 * GROW, dtype=np.int64)
            if self.count:
                k0, counts = self.span()
                at = k0 - (lo - GROW)
                grown[at : at + len(counts)] = counts
            self.bins, self.offset = grown, lo - GROW
        self.min_key, self.max_key = lo, hi


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
    bins: np.ndarray  # int64 counts of keys k0, k0 + 1, ...


def read_latency(d: LatencyWire) -> LatencyRead:
    """Read `d`; raises ValueError / KeyError / TypeError for a wire of another shape."""
    buckets = [int(n) for n in d["le"]]
    if len(buckets) != len(BUCKETS) + 1:
        raise ValueError(f"bucket layout differs: {len(buckets)} buckets, expected {len(BUCKETS) + 1}")
    raw, width = d["bins"], WIRE_WIDTHS.get(d["w"])
    if not isinstance(raw, bytes) or width is None:
        raise TypeError(f"sketch bins are {type(raw).__name__} of width {d['w']!r}, expected bytes of 1-8")
    bins = np.frombuffer(raw, dtype=width).astype(np.int64)  # (ValueError: not whole counts)
    k0 = int(d["k0"])
    used = np.flatnonzero(bins)
    if used.size:
        if int(bins.min()) < 0:
            raise ValueError("negative sketch bin counts")
        first, last = int(used[0]), int(used[-1])
        bins, k0 = bins[first : last + 1], k0 + first
        if k0 < KEYS[0] or k0 + len(bins) - 1 > KEYS[1]:  # no finite value has such a key (nor an array)
            raise ValueError(f"sketch keys {k0}..{k0 + len(bins) - 1} outside {KEYS[0]}..{KEYS[1]}")
    else:
        bins = _NO_BINS
    return LatencyRead(
        int(d["n"]), float(d["sum"]), int(d["zero"]), float(d["min"]), float(d["max"]), buckets, k0, bins
    )


class LatencyStats:
    """One latency's distribution: sketch bins, exact count/sum/min/max and Prometheus buckets."""

    __slots__ = ("_buckets", "_count", "_max", "_min", "_pending", "_store", "_sum", "_zero_count")

    def __init__(self) -> None:
        self._pending: list[float] = []
        self._store = KeyCounts()
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
            self._store.add_counts(keys, counts)

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
        return store.count_from(_MAPPING.key(value) + 1)

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
        """This distribution as `merge_read` adds it (its bins a view of the store's span)."""
        k0, bins = self._store.span()
        return LatencyRead(
            self._count, self._sum, self._zero_count, self._min, self._max, self._buckets, k0, bins
        )

    def to_wire(self) -> LatencyWire:
        self.flush()
        k0, bins = self._store.span()
        width = (
            1
            if not len(bins)
            else next(w for w, t in WIRE_WIDTHS.items() if int(bins.max()) <= np.iinfo(t).max)
        )
        return {
            "n": self._count,
            "sum": self._sum,
            "min": self._min,
            "max": self._max,
            "zero": self._zero_count,
            "k0": k0,
            "w": width,
            "bins": bins.astype(WIRE_WIDTHS[width]).tobytes(),
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
        if len(w.bins):
            self._store.add_span(w.k0, w.bins)
        self._zero_count += w.zero
        self._count += w.count
        self._sum += w.sum
        self._min = min(self._min, w.min)
        self._max = max(self._max, w.max)
        self._buckets = [a + b for a, b in zip(self._buckets, w.buckets, strict=True)]
