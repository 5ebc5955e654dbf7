"""The sketch's store (swarm/stats/sketch.py `KeyCounts`: ddsketch's DenseStore as one numpy array,
added to a report at a time) keeps exactly what the library's own per-key `add` and `merge` keep,
whatever the key ranges: overlapping, disjoint, growing either way, and values added after a
merge; and its ranks are the library's. A wire's bins that are not whole counts are refused."""

from __future__ import annotations

import numpy as np
import pytest
from ddsketch.store import DenseStore
from hypothesis import given, settings
from hypothesis import strategies as st

from swarm.stats.sketch import KeyCounts, LatencyStats, read_latency

values = st.lists(st.floats(min_value=1e-4, max_value=100.0, allow_nan=False), max_size=300)


def counts(store: DenseStore) -> dict[int, float]:
    return {store.offset + i: n for i, n in enumerate(store.bins) if n}


def library(parts: list[list[float]]) -> DenseStore:
    """What ddsketch itself keeps: per-key adds into one store per part, merged by DenseStore.merge."""
    total = DenseStore()
    for part in parts:
        s = LatencyStats()
        s.extend(part)
        s.flush()
        one = DenseStore()
        for k, n in counts(s._store).items():
            one.add(k, n)
        total.merge(one)
    return total


@settings(max_examples=150, deadline=None)
@given(st.lists(values, min_size=1, max_size=5), values)
def test_wire_and_merge_keep_what_the_library_keeps(parts: list[list[float]], after: list[float]) -> None:
    merged = LatencyStats()
    for part in parts:
        s = LatencyStats()
        s.extend(part)
        merged.merge(LatencyStats.from_wire(s.to_wire()))
    expected = library(parts)
    assert counts(merged._store) == counts(expected)
    assert merged._store.count == expected.count == sum(len(p) for p in parts) - merged.zero_count
    if expected.count:
        assert (merged._store.min_key, merged._store.max_key) == (expected.min_key, expected.max_key)
    merged.extend(after)  # the store stays usable: adds after a fast merge land in the right bins
    merged.flush()
    assert counts(merged._store) == counts(library([*parts, after]))
    for q in (0.0, 0.5, 0.99, 1.0):
        single = LatencyStats()
        single.extend([v for p in [*parts, after] for v in p])
        assert merged.quantile(q) == single.quantile(q)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-2000, 2000), st.integers(1, 50)), min_size=1, max_size=60))
def test_ranks_and_counts_above_are_the_librarys(adds: list[tuple[int, int]]) -> None:
    ours, theirs = KeyCounts(), DenseStore()
    for k, n in adds:  # one key at a time: every growth, either side, from any range
        ours.add_counts(np.array([k]), np.array([n]))
        theirs.add(k, n)
    assert counts(ours) == counts(theirs) and ours.count == theirs.count
    assert (ours.min_key, ours.max_key) == (theirs.min_key, theirs.max_key)
    for rank in [0, 0.5, *range(1, int(theirs.count), max(1, int(theirs.count) // 40)), theirs.count - 1]:
        assert ours.key_at_rank(rank) == theirs.key_at_rank(rank), rank
    for key in (
        theirs.min_key - 1,
        theirs.min_key,
        (theirs.min_key + theirs.max_key) // 2,
        theirs.max_key + 1,
    ):
        assert ours.count_from(key) == sum(n for k, n in counts(theirs).items() if k >= key)


def test_bins_that_are_not_whole_counts_are_refused() -> None:
    s = LatencyStats()
    s.extend([0.1, 0.2, 0.2, 3.0])
    wire = s.to_wire()
    assert wire["w"] == 1 and isinstance(wire["bins"], bytes)  # counts under 256: a byte each
    with pytest.raises(TypeError):
        read_latency({**wire, "bins": list(wire["bins"])})  # an older version's list of ints
    with pytest.raises(TypeError):
        read_latency({**wire, "w": 3})
    with pytest.raises(ValueError):
        read_latency({**wire, "w": 2, "bins": wire["bins"][:3]})  # not whole 2-byte counts
    with pytest.raises(ValueError, match="negative"):
        read_latency({**wire, "w": 8, "bins": np.array([2, -1, 3], dtype="<i8").tobytes()})
    many = LatencyStats()
    many.extend([0.5] * 70_000 + [0.1])  # a count past 65,535: 4 bytes each
    back = read_latency(many.to_wire())
    assert many.to_wire()["w"] == 4 and back.count == 70_001 and int(back.bins.max()) == 70_000
    with pytest.raises(ValueError, match="outside"):  # a key no value has: no array sized to it
        read_latency({**wire, "k0": 10**12})
    empty = read_latency(LatencyStats().to_wire())
    assert empty.count == 0 and len(empty.bins) == 0


def test_a_sketch_merged_into_itself_doubles_exactly() -> None:
    s = LatencyStats()
    s.extend([0.1, 0.2, 0.2, 3.0])
    s.flush()
    once = counts(s._store)
    s.merge(s)  # (its bins a view of its own store)
    assert s.count == s._store.count == 8 and counts(s._store) == {k: 2 * n for k, n in once.items()}
