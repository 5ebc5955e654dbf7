"""The master's fast paths into ddsketch's DenseStore (swarm/stats/sketch.py: `from_wire` sets the
store in one go, merges sum slices: `_add_bins`) keep exactly what the library's own per-key `add`
and `merge` keep, whatever the key ranges: overlapping, disjoint, growing either way, and values
added after a merge."""

from __future__ import annotations

from ddsketch.store import DenseStore
from hypothesis import given, settings
from hypothesis import strategies as st

from swarm.stats.sketch import LatencyStats

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
