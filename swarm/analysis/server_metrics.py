"""The target's own numbers: one normalised `ServerSnapshot` per scrape of its Prometheus /metrics
(the text read by swarm/analysis/server_parse.py), aggregated per stage.

`ServerSnapshot` holds the fields of swarm/core/server_families.py, whatever the family (`source`);
a field the family does not expose is None, never 0. Every figure has passed the sanity checks of
swarm/analysis/server_checks.py (`checked`, on parsing and on reading the JSONL back); one that
failed is None with the check it failed in `rejected`.

Pure functions turn a series of snapshots into per-stage statistics (`stage_stats`): gauge
mean/max, counter increases (Prometheus' `increase()`: a counter that goes back restarted from 0)
and rates, and histogram percentiles from bucket increases with the same linear interpolation as
Prometheus' `histogram_quantile`; each window also says the checks its scrapes failed (`failed`) and
the counters that went back (`resets`). The scrapes during a run are
swarm/orchestrate/pollers.py's `ServerPoller` (a plain thread into `DIR/server_metrics.jsonl`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.analysis.server_checks import histogram_fault, value_fault
from swarm.core.server_families import COUNTER_FIELDS, FAMILY_NAMES, GAUGE_FIELDS
from swarm.core.server_families import family as family_of
from swarm.stats.quantiles import PERCENTILES, bucket_width, histogram_quantile

SERVER_QUANTILES = ("p50", "p90", "p99")  # what a server histogram is summarised by (per stage)


# ---------------------------------------------------------------------------------------- histograms


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram: upper bounds (last +Inf) with cumulative counts, sum and count."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float = 0.0
    count: float = 0.0

    def delta(self, older: Histogram | None) -> Histogram:
        """Observations between `older` and this one (counter reset / other buckets: this one)."""
        if self.reset_since(older):
            return self
        assert older is not None
        return Histogram(
            self.bounds,
            tuple(a - b for a, b in zip(self.counts, older.counts, strict=True)),
            self.sum - older.sum,
            self.count - older.count,
        )

    def reset_since(self, older: Histogram | None) -> bool:
        """Nothing to subtract: no `older`, other buckets, or a count that went back (a restart)."""
        return (
            older is None
            or older.bounds != self.bounds
            or self.count < older.count
            or any(a < b for a, b in zip(self.counts, older.counts, strict=True))
        )

    def plus(self, other: Histogram) -> Histogram:
        """Both histograms' observations (the same bounds)."""
        return Histogram(
            self.bounds,
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            self.sum + other.sum,
            self.count + other.count,
        )

    def quantile(self, q: float) -> float | None:
        return histogram_quantile(q, self.bounds, self.counts)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "le": [_le_text(b) for b in self.bounds],
            "counts": list(self.counts),
            "sum": self.sum,
            "count": self.count,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Histogram:
        return cls(
            tuple(float(b) for b in d["le"]),
            tuple(float(c) for c in d["counts"]),
            float(d.get("sum", 0.0)),
            float(d.get("count", 0.0)),
        )


def _le_text(b: float) -> str:
    return "+Inf" if math.isinf(b) else repr(b)


# ---------------------------------------------------------------------------------------- snapshots


@dataclass
class ServerSnapshot:
    """One scrape, normalised. None = the server does not expose that number."""

    ts: float
    source: str = "unknown"  # the family: vllm | llamacpp | sglang | tgi | trtllm | unknown
    model: str | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0-1
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted: float | None = None
    aborts: float | None = None  # requests the server aborted (SGLang's counter; vLLM counts no client's)
    request_success: dict[str, float] = field(default_factory=dict)  # finished_reason -> count
    histograms: dict[str, Histogram] = field(default_factory=dict)  # ttft itl e2e queue prefill decode
    # figure (a field, `requests` for request_success, a histogram's key) -> the sanity check it
    # failed (swarm/analysis/server_checks.py): the figure itself is left out (None / absent)
    rejected: dict[str, str] = field(default_factory=dict)
    families: tuple[str, ...] = ()  # more than one: the names of several families in this one scrape

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": self.ts, "source": self.source, "model": self.model}
        for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
            d[name] = getattr(self, name)
        d["request_success"] = dict(self.request_success)
        d["histograms"] = {k: h.to_json() for k, h in self.histograms.items()}
        if self.rejected:
            d["rejected"] = dict(self.rejected)
        if self.families:
            d["families"] = list(self.families)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ServerSnapshot:
        """A JSONL line back, its figures checked again (a file from before the checks, or edited)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"a JSON {type(d).__name__}, not an object")
        snap = cls(ts=float(d["ts"]), source=str(d.get("source", "unknown")), model=d.get("model"))
        for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
            v = d.get(name)
            setattr(snap, name, None if v is None else float(v))
        snap.request_success = {str(k): float(v) for k, v in (d.get("request_success") or {}).items()}
        snap.histograms = {str(k): Histogram.from_json(h) for k, h in (d.get("histograms") or {}).items()}
        snap.rejected = {str(k): str(v) for k, v in (d.get("rejected") or {}).items()}
        snap.families = tuple(str(f) for f in d.get("families") or ())
        if not math.isfinite(snap.ts):
            raise ValueError(f"scrape time {snap.ts}")
        return checked(snap)


def checked(snap: ServerSnapshot) -> ServerSnapshot:
    """`snap` with every figure that fails a sanity check (server_checks.py) taken out and the
    check it failed kept in `snap.rejected`."""
    for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
        v = getattr(snap, name)
        fault = None if v is None else value_fault(name, v)
        if fault:
            setattr(snap, name, None)
            snap.rejected.setdefault(name, fault)
    for reason, v in list(snap.request_success.items()):
        fault = value_fault("requests", v)
        if fault:
            del snap.request_success[reason]
            snap.rejected.setdefault("requests", fault)
    for key, h in list(snap.histograms.items()):
        fault = histogram_fault(h.bounds, h.counts, h.sum, h.count)
        if fault:
            del snap.histograms[key]
            snap.rejected.setdefault(key, fault)
    return snap


# ---------------------------------------------------------------------------------------- per stage


@dataclass
class StageServerStats:
    """The server's view of one stage window. None = not exposed / not enough samples."""

    stage: int
    samples: int = 0
    duration_s: float | None = None  # between the two scrapes the counter deltas span
    first_ts: float | None = None  # those two scrapes' times
    last_ts: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    running_min: float | None = None
    running_pinned: float | None = None  # share of samples within 2% (>= 1) of running_max
    waiting_mean: float | None = None
    waiting_max: float | None = None
    # the queue most of the window held: a spawn wave one scrape catches before the next step admits
    # it (40 waiting, then 2) moves the mean, not this
    waiting_median: float | None = None
    kv_mean: float | None = None
    kv_max: float | None = None
    preemptions: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    prompt_tok_s: float | None = None
    generation_tok_s: float | None = None
    prefix_hit_rate: float | None = None
    # prompt tokens served from the prefix / prompt cache (vLLM prefix_cache_hits, llama.cpp
    # prompt_tokens_cached_total): `prompt_tokens` less these is what the server computed
    prefix_hits: float | None = None
    # how far the delta of processed prompt tokens (prompt_tokens - prefix_hits) can be off the
    # server's true count only because of how its /metrics printed them (`printed_error`)
    processed_error: float = 0.0
    source: str = "unknown"  # the family the last scrape came from (core/server_families.py)
    requests: float | None = None  # request_success delta, all reasons
    aborts: float | None = None  # the server's aborted requests (sglang:num_aborted_requests_total)
    finish_reasons: dict[str, float] = field(default_factory=dict)
    spec_acceptance_rate: float | None = None  # accepted / draft tokens
    spec_mean_acceptance_length: float | None = None  # 1 + accepted / drafts
    # ttft -> {p50 p90 p99 mean count p50_width}; p50_width: the bucket holding p50 (its resolution)
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)
    # figure -> the sanity check its scrapes failed in the window ("NaN in 3 of 10 scrapes"); `family`:
    # the names of several families: a finding read from such a figure is withheld (server_trust.py)
    failed: dict[str, str] = field(default_factory=dict)
    resets: dict[str, int] = field(default_factory=dict)  # figure -> times its counter went back (a restart)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def printed_error(value: float | None, source: str = "llamacpp") -> float:
    """How far a counter value read from /metrics can be from the server's own: llama-server writes
    its counters (doubles) through a C++ stream's default 6 significant digits, so 1,234,567 tokens
    read back as 1.23457e+06, up to half a unit of the 6th digit off (exact below 1,000,000). vLLM's
    prometheus_client writes repr(float): exact."""
    if source != "llamacpp" or value is None or abs(value) < 1e6:
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - 5)


def increase(values: Sequence[float | None]) -> tuple[float | None, int]:
    """A counter's increase over consecutive scrapes, as Prometheus' `increase()`: a value below the
    one before is a restart from 0, so the increase adds the value after it. Returns (increase,
    resets); None where the first or the last scrape lacks the counter (a scrape in between
    that lacks it, its figure rejected, is passed over)."""
    if not values or values[0] is None or values[-1] is None:
        return None, 0
    total, resets, prev = 0.0, 0, values[0]
    for v in values[1:]:
        if v is None:
            continue
        if v < prev:
            total, resets = total + v, resets + 1
        else:
            total += v - prev
        prev = v
    return total, resets


def histogram_increase(hists: Sequence[Histogram | None]) -> tuple[Histogram | None, int]:
    """A histogram's observations over consecutive scrapes, resets counted as `increase` does (the
    first scrape without it: counted from zero). Returns (observations, resets); None where the
    last scrape lacks it. Buckets that changed keep the observations since the change."""
    if not hists or hists[-1] is None:
        return None, 0
    total: Histogram | None = None
    resets, prev = 0, hists[0]
    for h in hists[1:] if len(hists) > 1 else hists:
        if h is None:
            continue
        step = h.delta(prev)
        if prev is not None and h.reset_since(prev):
            resets += 1
        total = step if total is None or total.bounds != step.bounds else total.plus(step)
        prev = h
    return total, resets


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _gauges(out: StageServerStats, inside: Sequence[ServerSnapshot]) -> None:
    """The gauges' mean, max (and the queue's median, the running's min and pinned share)."""
    for name, attr in (("running", "running"), ("waiting", "waiting"), ("kv", "kv_usage")):
        values = [getattr(s, attr) for s in inside if getattr(s, attr) is not None]
        if values:
            setattr(out, f"{name}_mean", _mean(values))
            setattr(out, f"{name}_max", max(values))
            if name == "waiting":
                out.waiting_median = statistics.median(values)
            if name == "running":
                out.running_min = min(values)
                top = max(values)
                out.running_pinned = sum(v >= top - max(1.0, 0.02 * top) for v in values) / len(values)


def _checks(out: StageServerStats, scrapes: Sequence[ServerSnapshot]) -> None:
    """The sanity checks the window's scrapes failed, per figure: what failed, in how many of them;
    a window whose scrapes name several families gets `family`."""
    failed: dict[str, tuple[str, int]] = {}
    for snap in scrapes:
        for figure, fault in snap.rejected.items():
            first, n = failed.get(figure, (fault, 0))
            failed[figure] = (first, n + 1)
    out.failed = {
        figure: f"{fault} in {n} of {len(scrapes)} scrapes" for figure, (fault, n) in failed.items()
    }
    seen = {f for snap in scrapes for f in snap.families} | {snap.source for snap in scrapes}
    if len(seen) > 1:  # in one scrape, or one after another: no one engine's figures
        order = [f for f in FAMILY_NAMES if f in seen] + sorted(seen - set(FAMILY_NAMES))
        titles = " and ".join(family_of(f).title if f in FAMILY_NAMES else f for f in order)
        out.failed["family"] = f"the metric names of {titles} in the server's /metrics"


def window_stats(
    snapshots: Sequence[ServerSnapshot], stage: int, start: float, end: float
) -> StageServerStats:
    """Statistics of one window (wall seconds); `snapshots` sorted by ts.

    Gauges: the scrapes in [start, end) (a scrape at a boundary belongs to the next stage).
    Counters and histograms: the increase (`increase`: a drop is a restart from 0) from the last
    scrape at or before `start` (else the first one inside) to the last scrape at or before `end`.
    `failed`: the sanity checks the window's scrapes failed; `resets`: the counters that went back.
    """
    out = StageServerStats(stage=stage)
    inside = [s for s in snapshots if start <= s.ts < end]
    out.samples = len(inside)
    _gauges(out, inside)
    before = [s for s in snapshots if s.ts <= start]
    base = before[-1] if before else (inside[0] if inside else None)
    upto = [s for s in snapshots if s.ts <= end]
    last = upto[-1] if upto else None
    if base is None or last is None or last.ts <= base.ts:
        _checks(out, inside)
        return out
    span = [s for s in snapshots if base.ts <= s.ts <= last.ts]
    _checks(out, sorted({id(s): s for s in (*span, *inside)}.values(), key=lambda s: s.ts))
    out.duration_s = last.ts - base.ts
    out.first_ts, out.last_ts = base.ts, last.ts
    out.source = last.source
    deltas: dict[str, float | None] = {}
    for name in COUNTER_FIELDS:
        deltas[name], resets = increase([getattr(s, name) for s in span])
        if resets:
            out.resets[name] = resets
    _counters(out, deltas, base, last)
    if any(s.request_success for s in span):
        reasons: dict[str, float] = {}
        for r in sorted({r for s in span for r in s.request_success}):
            # a reason not yet counted is 0; a scrape whose count was rejected is passed over
            seen = [s.request_success.get(r, None if "requests" in s.rejected else 0.0) for s in span]
            reasons[r], resets = increase([0.0 if seen[0] is None else seen[0], *seen[1:]])
            if resets:
                out.resets["requests"] = out.resets.get("requests", 0) + resets
        out.finish_reasons = {r: v for r, v in reasons.items() if v}
        out.requests = math.fsum(v or 0.0 for v in reasons.values())
    for key in sorted({k for s in span for k in s.histograms}):
        d, resets = histogram_increase([s.histograms.get(key) for s in span])
        if resets:
            out.resets[key] = resets
        if d is None:
            continue
        stats: dict[str, float | None] = {k: d.quantile(PERCENTILES[k]) for k in SERVER_QUANTILES}
        stats["mean"], stats["count"] = d.mean, d.count
        stats["p50_width"] = bucket_width(d.bounds, stats["p50"])
        out.latency[key] = stats
    return out


def _counters(
    out: StageServerStats, deltas: Mapping[str, float | None], base: ServerSnapshot, last: ServerSnapshot
) -> None:
    """The counters' increases, rates and ratios (a ratio above 1, more hits than queries or more
    accepted tokens than drafted, is a failed check, not a figure)."""
    assert out.duration_s is not None
    out.preemptions = deltas["preemptions"]
    out.prompt_tokens, out.generation_tokens = deltas["prompt_tokens"], deltas["generation_tokens"]
    if out.prompt_tokens is not None:
        out.prompt_tok_s = out.prompt_tokens / out.duration_s
    if out.generation_tokens is not None:
        out.generation_tok_s = out.generation_tokens / out.duration_s
    out.prefix_hits = deltas["prefix_hits"]
    out.aborts = deltas["aborts"]
    if last.source == "llamacpp":
        out.processed_error = sum(
            printed_error((s.prompt_tokens or 0.0) - (s.prefix_hits or 0.0)) for s in (base, last)
        )
    if deltas["prefix_queries"]:
        out.prefix_hit_rate = (deltas["prefix_hits"] or 0.0) / deltas["prefix_queries"]
    if deltas["spec_draft_tokens"]:
        out.spec_acceptance_rate = (deltas["spec_accepted"] or 0.0) / deltas["spec_draft_tokens"]
    if deltas["spec_drafts"]:
        out.spec_mean_acceptance_length = 1.0 + (deltas["spec_accepted"] or 0.0) / deltas["spec_drafts"]
    for rate, figure, what in (
        ("prefix_hit_rate", "prefix_hits", "more prefix-cache hits than queries"),
        ("spec_acceptance_rate", "spec_accepted", "more accepted draft tokens than drafted"),
    ):
        if (getattr(out, rate) or 0.0) > 1.0:
            setattr(out, rate, None)
            out.failed.setdefault(figure, what)
    if out.spec_acceptance_rate is None and "spec_accepted" in out.failed:
        out.spec_mean_acceptance_length = None


def histogram_delta(
    snapshots: Sequence[ServerSnapshot], key: str, first_ts: float, last_ts: float
) -> Histogram | None:
    """The histogram `key`'s observations between the scrapes taken at `first_ts` and `last_ts`
    (a `StageServerStats`' own two scrapes; `histogram_increase` over the scrapes between them);
    None where either scrape is not there or the last lacks it."""
    span = [s for s in snapshots if first_ts <= s.ts <= last_ts]
    if not span or span[0].ts != first_ts or span[-1].ts != last_ts:
        return None
    return histogram_increase([s.histograms.get(key) for s in span])[0]


def stage_stats(
    snapshots: Iterable[ServerSnapshot], windows: Iterable[tuple[int, float, float]]
) -> dict[int, StageServerStats]:
    """Per-stage statistics: `windows` are (stage index, start wall s, end wall s)."""
    ordered = sorted(snapshots, key=lambda s: s.ts)
    return {i: window_stats(ordered, i, start, end) for i, start, end in windows}


def read_snapshots(path: Path) -> list[ServerSnapshot]:
    """`server_metrics.jsonl` -> snapshots (a torn last line from a killed run is skipped)."""
    out = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            out.append(ServerSnapshot.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


UNOBSERVABLE_SUFFIX = "_unobservable.txt"
"""Beside a server_metrics JSONL (its stem + this): why the server side was not observable (the poller's
first failure, or `--server-family none`), one line, for the diagnosis of a run without server
statistics."""


def unobservable_path(jsonl: Path) -> Path:
    """Where the poller of `jsonl` leaves its reason."""
    return Path(jsonl).with_name(Path(jsonl).stem + UNOBSERVABLE_SUFFIX)


def unobservable_reason(jsonl: Path) -> str | None:
    """The reason the poller of `jsonl` left (None: it left none)."""
    path = unobservable_path(jsonl)
    return (path.read_text().strip() or None) if path.exists() else None


def metrics_url(host: str, family: str = "auto") -> str:
    """The default --server-metrics URL: the target's own /metrics (TensorRT-LLM's Prometheus text
    is at /prometheus/metrics: its /metrics is a JSON list of iteration stats)."""
    return host.rstrip("/") + family_of(family).metrics_path
