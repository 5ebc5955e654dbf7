"""The target's own numbers: scrape its Prometheus /metrics, normalise, aggregate per stage.

One normalised `ServerSnapshot` per scrape, whatever the server: vLLM, llama.cpp, SGLang, TGI,
TensorRT-LLM, each family's names (and what each lacks) in swarm/core/server_families.py,
detected from the names or forced (`parse_metrics(family=...)`, `swarm run --server-family`).
`source` is the family's name (`unknown`: none of them). A field the family does not expose is
None, never 0.

Label sets: with several `model_name`s the one asked for is kept (all of them when it is not
there; TensorRT-LLM's literal "undefined" is no model); the other label sets are summed
(data-parallel engines: vLLM's `engine`, SGLang's `dp_rank`; KV usage averaged), except the
rank labels a family names (SGLang's tp/pp/moe-ep ranks report one batch each: the lowest is read).

Pure functions turn a series of snapshots into per-stage statistics (`stage_stats`): gauge
mean/max, counter deltas and rates, and histogram percentiles from bucket deltas with the same
linear interpolation as Prometheus' `histogram_quantile`. The scrapes during a run are
swarm/orchestrate/pollers.py's `ServerPoller` (a plain thread into `DIR/server_metrics.jsonl`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm.core.server_families import (
    COUNTER_FIELDS,
    GAUGE_FIELDS,
    NO_REASON,
    Family,
    detect,
)
from swarm.core.server_families import family as family_of
from swarm.stats.quantiles import (
    PERCENTILES,
    bucket_width,
    histogram_quantile,
)

AVERAGED_GAUGES = frozenset({"kv_usage"})  # a fraction per engine: averaged, not summed
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
        if older is None or older.bounds != self.bounds or self.count < older.count:
            return self
        return Histogram(
            self.bounds,
            tuple(a - b for a, b in zip(self.counts, older.counts, strict=True)),
            self.sum - older.sum,
            self.count - older.count,
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
    request_success: dict[str, float] = field(default_factory=dict)  # finished_reason -> count
    histograms: dict[str, Histogram] = field(default_factory=dict)  # ttft itl e2e queue prefill decode

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": self.ts, "source": self.source, "model": self.model}
        for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
            d[name] = getattr(self, name)
        d["request_success"] = dict(self.request_success)
        d["histograms"] = {k: h.to_json() for k, h in self.histograms.items()}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ServerSnapshot:
        snap = cls(ts=float(d["ts"]), source=d.get("source", "unknown"), model=d.get("model"))
        for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
            v = d.get(name)
            setattr(snap, name, None if v is None else float(v))
        snap.request_success = {k: float(v) for k, v in (d.get("request_success") or {}).items()}
        snap.histograms = {k: Histogram.from_json(h) for k, h in (d.get("histograms") or {}).items()}
        return snap


def parse_metrics(
    text: str, ts: float | None = None, model: str | None = None, family: str = "auto"
) -> ServerSnapshot:
    """Prometheus text exposition -> ServerSnapshot. Raises ValueError on text that is not one.

    `family`: `auto` detects it from the names (server_families.detect); a family's name reads the
    scrape with that family's names whatever else it holds (the snapshot's `source` is then that
    family, and every field it finds none of stays None)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for metric_family in text_string_to_metric_families(text):
        for s in metric_family.samples:
            samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    source = detect(samples) if family == "auto" else family
    fam = family_of(source)
    models = sorted(
        {lab["model_name"] for rows in samples.values() for lab, _ in rows if "model_name" in lab}
        - {"undefined"}  # TensorRT-LLM's literal label value
    )
    keep = model if model in models else None

    def rows(name: str) -> list[tuple[dict[str, str], float]]:
        out = [
            (lab, v)
            for lab, v in samples.get(name, [])
            if (keep is None or lab.get("model_name", keep) == keep) and not math.isnan(v)
        ]
        return _lowest_rank(out, fam.rank_labels)

    snap = ServerSnapshot(
        ts=time.time() if ts is None else ts,
        source=source,
        model=keep or (models[0] if len(models) == 1 else None),
    )
    _read_values(snap, fam, rows)
    success = _first_present(fam.success, rows) if fam.success else None
    for lab, v in rows(success) if success else []:
        reason = lab.get(fam.reason_label, "unknown") if fam.reason_label else NO_REASON
        snap.request_success[reason] = snap.request_success.get(reason, 0.0) + v
    for key, candidates in fam.histograms.items():
        hist = _histogram(rows, candidates)
        if hist is not None:
            snap.histograms[key] = hist
    return snap


def _first_present(names: Sequence[str], rows: Any) -> str:
    return next((n for n in names if rows(n)), names[0])


def _lowest_rank(
    rows: list[tuple[dict[str, str], float]], rank_labels: Sequence[str]
) -> list[tuple[dict[str, str], float]]:
    """Only the series of the lowest value of each rank label (SGLang's tp/pp/moe-ep ranks: each
    rank reports the same scheduler's batch); series without the label are kept."""
    for label in rank_labels:
        ranks = [lab[label] for lab, _ in rows if label in lab]
        if ranks:
            low = min(ranks, key=lambda r: (len(r), r))  # numeric order for decimal ranks
            rows = [(lab, v) for lab, v in rows if lab.get(label, low) == low]
    return rows


def _read_values(snap: ServerSnapshot, fam: Family, rows: Any) -> None:
    """The gauges, ratios and counters of `fam` into `snap` (the first name present per field);
    llama.cpp's cached prompt tokens added back."""
    for fieldname, candidates in (*fam.gauges.items(), *fam.counters.items()):
        for name in candidates:
            values = [v for _, v in rows(name)]
            if values:
                total = math.fsum(values)
                setattr(snap, fieldname, total / len(values) if fieldname in AVERAGED_GAUGES else total)
                break
    for fieldname, (num, den) in fam.ratios.items():
        top, bottom = math.fsum(v for _, v in rows(num)), math.fsum(v for _, v in rows(den))
        if rows(num) and bottom > 0:
            setattr(snap, fieldname, top / bottom)
    cached = [v for _, v in rows(fam.cached)] if fam.cached else []
    if cached and snap.prompt_tokens is not None:
        snap.prefix_hits = math.fsum(cached)
        snap.prompt_tokens += snap.prefix_hits
        snap.prefix_queries = snap.prompt_tokens


def _histogram(rows: Any, candidates: Sequence[str]) -> Histogram | None:
    """The first of `candidates` with buckets, its label sets summed bucket by bucket."""
    for name in candidates:
        buckets: dict[float, float] = {}
        for lab, v in rows(name + "_bucket"):
            le = float(lab.get("le", "nan"))
            if not math.isnan(le):
                buckets[le] = buckets.get(le, 0.0) + v
        if buckets:
            bounds = tuple(sorted(buckets))
            return Histogram(
                bounds,
                tuple(buckets[b] for b in bounds),
                math.fsum(v for _, v in rows(name + "_sum")),
                math.fsum(v for _, v in rows(name + "_count")),
            )
    return None


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
    finish_reasons: dict[str, float] = field(default_factory=dict)
    spec_acceptance_rate: float | None = None  # accepted / draft tokens
    spec_mean_acceptance_length: float | None = None  # 1 + accepted / drafts
    # ttft -> {p50 p90 p99 mean count p50_width}; p50_width: the bucket holding p50 (its resolution)
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)

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


def _counter_delta(new: float | None, old: float | None) -> float | None:
    if new is None or old is None:
        return None
    return new - old if new >= old else new  # a reset: the server restarted, count from zero


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def window_stats(
    snapshots: Sequence[ServerSnapshot], stage: int, start: float, end: float
) -> StageServerStats:
    """Statistics of one window (wall seconds); `snapshots` sorted by ts.

    Gauges: the scrapes in [start, end) (a scrape at a boundary belongs to the next stage).
    Counters and histograms: the increase from the last scrape at or before `start` (else the
    first one inside) to the last scrape at or before `end`.
    """
    out = StageServerStats(stage=stage)
    inside = [s for s in snapshots if start <= s.ts < end]
    out.samples = len(inside)
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
    before = [s for s in snapshots if s.ts <= start]
    base = before[-1] if before else (inside[0] if inside else None)
    upto = [s for s in snapshots if s.ts <= end]
    last = upto[-1] if upto else None
    if base is None or last is None or last.ts <= base.ts:
        return out
    out.duration_s = last.ts - base.ts
    out.first_ts, out.last_ts = base.ts, last.ts
    out.source = last.source
    deltas = {name: _counter_delta(getattr(last, name), getattr(base, name)) for name in COUNTER_FIELDS}
    out.preemptions = deltas["preemptions"]
    out.prompt_tokens, out.generation_tokens = deltas["prompt_tokens"], deltas["generation_tokens"]
    if out.prompt_tokens is not None:
        out.prompt_tok_s = out.prompt_tokens / out.duration_s
    if out.generation_tokens is not None:
        out.generation_tok_s = out.generation_tokens / out.duration_s
    out.prefix_hits = deltas["prefix_hits"]
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
    if last.request_success or base.request_success:
        reasons = {
            r: _counter_delta(v, base.request_success.get(r, 0.0)) or 0.0
            for r, v in last.request_success.items()
        }
        out.finish_reasons = {r: v for r, v in reasons.items() if v}
        out.requests = math.fsum(reasons.values())
    for key, hist in last.histograms.items():
        d = hist.delta(base.histograms.get(key))
        stats: dict[str, float | None] = {k: d.quantile(PERCENTILES[k]) for k in SERVER_QUANTILES}
        stats["mean"], stats["count"] = d.mean, d.count
        stats["p50_width"] = bucket_width(d.bounds, stats["p50"])
        out.latency[key] = stats
    return out


def histogram_delta(
    snapshots: Sequence[ServerSnapshot], key: str, first_ts: float, last_ts: float
) -> Histogram | None:
    """The histogram `key`'s observations between the scrapes taken at `first_ts` and `last_ts`
    (a `StageServerStats`' own two scrapes); None where either scrape lacks it."""
    by_ts = {s.ts: s for s in snapshots}
    base, last = by_ts.get(first_ts), by_ts.get(last_ts)
    if base is None or last is None or key not in last.histograms:
        return None
    return last.histograms[key].delta(base.histograms.get(key))


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
        except (ValueError, KeyError, TypeError):
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
