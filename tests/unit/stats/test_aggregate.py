"""Aggregates: exact counters, sketch accuracy vs numpy's exact percentile, wire round-trip, and one
process vs N workers giving the same numbers on the same recorded samples."""

from __future__ import annotations

import math
import random

import msgpack
import numpy as np
import pytest

from swarm.core.records import OUTCOMES, Outcome, RequestRecord
from swarm.stats import quantiles as metrics
from swarm.stats.aggregate import LATENCIES, Aggregate
from swarm.stats.sketch import _MAPPING, BUCKETS, REL_ACCURACY, LatencyStats, bucket_keys
from tests.helpers.synthetic import exact_values, synthetic_records

QS = (0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def assert_close(estimate, exact):
    assert metrics.relative_error(estimate, exact) <= 0.01, (estimate, exact)


def test_vectorised_keys_match_the_library_mapping():
    v = np.random.default_rng(1).lognormal(math.log(0.05), 2.0, 200_000)
    assert bucket_keys(v).tolist() == [_MAPPING.key(x) for x in v.tolist()]


@pytest.mark.parametrize("dist", ["lognormal", "uniform", "bimodal", "with_zeros", "constant", "tiny"])
def test_percentiles_within_1pct_of_numpy_lower(dist):
    rng = np.random.default_rng(3)
    n = 50_000
    v = {
        "lognormal": lambda: rng.lognormal(math.log(0.3), 1.0, n),
        "uniform": lambda: rng.uniform(0.001, 20.0, n),
        "bimodal": lambda: np.concatenate(
            [rng.normal(0.02, 0.002, n // 2), rng.normal(2.0, 0.3, n // 2)]
        ).clip(1e-4),
        "with_zeros": lambda: np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(math.log(0.015), 0.4, n)),
        "constant": lambda: np.full(n, 0.123),
        "tiny": lambda: rng.lognormal(math.log(0.02), 0.5, 7),
    }[dist]()
    s = LatencyStats()
    s.extend(v.tolist())
    for q in QS:
        exact = float(np.percentile(v, q * 100, method="lower"))
        assert exact == metrics.percentile(v.tolist(), q)
        assert_close(s.quantile(q), exact)
    assert s.count == len(v) and s.max == v.max() and s.min == v.min()
    assert s.mean == pytest.approx(v.mean(), rel=1e-9)


def test_empty_stats():
    s = LatencyStats()
    assert s.quantile(0.5) is None and s.mean is None and s.count == 0
    assert s.cumulative_buckets()[-1] == (math.inf, 0)


def test_prometheus_buckets_are_exact_counts_with_le_semantics():
    s = LatencyStats()
    values = [0.001, 0.0010001, 0.1, 0.1, 7680.0, 9999.0, 0.0]
    s.extend(values)
    cum = dict(s.cumulative_buckets())
    for bound in (*BUCKETS, math.inf):
        assert cum[bound] == sum(v <= bound for v in values)


def test_buckets_include_every_vllm_boundary():
    from swarm.core.buckets import VLLM_E2E_BUCKETS, VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS

    assert set(VLLM_TTFT_BUCKETS) | set(VLLM_ITL_BUCKETS) | set(VLLM_E2E_BUCKETS) <= set(BUCKETS)
    assert list(BUCKETS) == sorted(set(BUCKETS))


def test_counters_warmup_and_failures():
    ok = RequestRecord(
        "a", 100.0, ttft_s=0.1, e2e_s=1.0, itl_s=[0.01, 0.02], output_tokens=3, prompt_tokens=5
    )
    warm = RequestRecord("a", 101.0, ttft_s=9.0, e2e_s=9.0, output_tokens=2, warmup=True)
    failed = RequestRecord("a", 102.0, outcome=Outcome.TIMEOUT, ttft_s=5.0, e2e_s=30.0, output_tokens=1)
    agg = Aggregate()
    for r in (ok, warm, failed):
        agg.add(r)
    c = agg.combined()
    assert c.requests == 3 and c.warmup_requests == 1 and c.failed == 1
    assert c.failures == {o.value: (1 if o is Outcome.TIMEOUT else 0) for o in OUTCOMES if o.failed}
    assert (c.prompt_tokens, c.output_tokens) == (5, 6)
    assert c.latencies["ttft"].count == 1 and c.latencies["ttft"].max == 0.1  # warm-up and failure excluded
    assert c.latencies["itl"].count == 2
    assert c.window_s() == pytest.approx(132.0 - 100.0)
    # the warm-up's answered TTFT (the search's settling test) is kept apart, and rides the wire
    assert c.warmup_ttft == [1, 9.0]
    back = Aggregate.from_wire(msgpack.unpackb(msgpack.packb(agg.to_wire()))).combined()
    assert back.warmup_ttft == [1, 9.0]


def test_wire_round_trip_is_msgpack_clean_and_lossless():
    records = synthetic_records(400)
    agg = Aggregate()
    for r in records:
        agg.add(r)
    wire = agg.to_wire()
    packed = msgpack.packb(wire, use_bin_type=True, strict_types=True)
    back = Aggregate.from_wire(msgpack.unpackb(packed, raw=False))
    assert back.to_wire() == wire
    with pytest.raises(ValueError):
        Aggregate.from_wire({**wire, "v": 99})


def test_take_delta_empties_the_worker_side():
    agg = Aggregate()
    agg.add(RequestRecord("a", 1.0, e2e_s=1.0))
    delta = agg.take_delta()
    assert delta.combined().requests == 1 and not agg and agg.combined().requests == 0


def _ship(agg: Aggregate) -> dict:
    """What the master gets: wire form through msgpack, as Locust's RPC sends it."""
    return msgpack.unpackb(msgpack.packb(agg.take_delta().to_wire()), raw=False)


def _merge(master: Aggregate, wire: dict, path: str) -> None:
    if path == "from_wire":  # a delta built, then merged
        master.merge(Aggregate.from_wire(wire))
    else:  # the master's own: read and checked, then added without building cells
        master.merge_read(Aggregate.read_wire(wire))


@pytest.mark.parametrize("path", ["from_wire", "merge_read"])
@pytest.mark.parametrize("n_workers", [2, 5])
def test_one_process_and_n_workers_agree(n_workers, path):
    records = synthetic_records(3000, seed=11)
    single = Aggregate()
    for r in records:
        single.add(r)

    rng = random.Random(5)
    workers = [Aggregate() for _ in range(n_workers)]
    master = Aggregate()
    for i, r in enumerate(records):
        workers[rng.randrange(n_workers)].add(r)
        if i % 137 == 0:  # report intervals at arbitrary points
            _merge(master, _ship(workers[rng.randrange(n_workers)]), path)
    for w in workers:
        _merge(master, _ship(w), path)

    assert sorted(master.cells) == sorted(single.cells)
    for key, a in single.cells.items():
        b = master.cells[key]
        for attr in (
            "requests",
            "warmup_requests",
            "outcomes",
            "prompt_tokens",
            "output_tokens",
            "reasoning_tokens",
            "first_start_s",
            "last_end_s",
        ):
            assert getattr(a, attr) == getattr(b, attr), (key, attr)
        for name in LATENCIES:
            sa, sb = a.latencies[name], b.latencies[name]
            assert (sa.count, sa.buckets, sa.zero_count, sa.min, sa.max) == (
                sb.count,
                sb.buckets,
                sb.zero_count,
                sb.min,
                sb.max,
            )
            assert sa.sum == pytest.approx(sb.sum, rel=1e-12)
            for q in QS:
                assert sa.quantile(q) == sb.quantile(q)  # same bins, same estimate

    for workload in (None, *single.workloads()):
        for stage in (None, *single.stages()):
            cell = master.combined(workload, stage)
            subset = [
                r
                for r in records
                if (workload is None or r.workload == workload) and (stage is None or r.stage == stage)
            ]
            assert cell.requests == len(subset)
            assert cell.output_tokens == sum(r.output_tokens for r in subset)
            for name in LATENCIES:
                exact = exact_values(subset, name)
                assert cell.latencies[name].count == len(exact)
                for q in QS if exact else ():  # (these records are no agent steps: no ttftc, no task)
                    assert_close(
                        cell.latencies[name].quantile(q), float(np.percentile(exact, q * 100, method="lower"))
                    )


def test_a_read_report_is_added_as_its_merged_delta_would_be_and_never_shared():
    base, wire = Aggregate(), Aggregate()
    for r in synthetic_records(300, seed=3):
        base.add(r)
    for r in synthetic_records(200, seed=4):
        wire.add(r)
    report = msgpack.unpackb(msgpack.packb(wire.to_wire()), raw=False)
    merged = Aggregate.from_wire(base.to_wire())
    merged.merge(Aggregate.from_wire(report))
    read = Aggregate.read_wire(report)
    into_base, into_empty = Aggregate.from_wire(base.to_wire()), Aggregate()
    into_base.merge_read(read)
    into_empty.merge_read(read)  # the same read, added to a second aggregate (the charts' slot)
    assert into_base.to_wire() == merged.to_wire()
    assert into_empty.to_wire() == Aggregate.from_wire(report).to_wire()
    into_empty.merge_read(read)  # adding again changes neither the read nor the first aggregate
    assert into_base.to_wire() == merged.to_wire()
    again = Aggregate()
    again.merge_read(read)
    assert again.to_wire() == Aggregate.from_wire(report).to_wire()


def test_a_malformed_report_adds_nothing():
    agg = Aggregate()
    for r in synthetic_records(50, seed=5):
        agg.add(r)
    before = agg.to_wire()
    wire = Aggregate()
    for r in synthetic_records(50, seed=6):
        wire.add(r)
    bad = wire.to_wire()
    last = bad["cells"][-1]
    name = next(iter(last["lat"]))
    last["lat"][name] = {**last["lat"][name], "le": [1, 2]}  # the last part read is of another layout
    with pytest.raises(ValueError, match="bucket layout"):
        agg.merge_read(Aggregate.read_wire(bad))
    bad = wire.to_wire()
    bad["cells"][-1]["outcomes"] = {"no_such_outcome": 1}
    with pytest.raises(ValueError):
        Aggregate.read_wire(bad)
    assert agg.to_wire() == before


def test_add_cost_is_small():
    """The hot path: ~160 ITL values a record. Measured here: ~10 ns a value to add, ~40 ns at flush."""
    import time

    records = synthetic_records(1000, seed=2)
    n_values = sum(len(r.itl_s) + 4 for r in records)
    agg = Aggregate()
    t = time.perf_counter()
    for r in records:
        agg.add(r)
    agg.to_wire()  # includes the bulk insert
    per_value = (time.perf_counter() - t) / n_values
    assert per_value < 2e-6, f"{per_value * 1e9:.0f} ns per value"
    assert REL_ACCURACY <= 0.01
