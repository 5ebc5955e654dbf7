"""A target's Prometheus /metrics text -> one normalised `ServerSnapshot` (swarm/analysis/server_metrics.py).

Whatever the server: vLLM, llama.cpp, SGLang, TGI, TensorRT-LLM, each family's names (and what each
lacks) in swarm/core/server_families.py, detected from the names or forced (`parse_metrics(family=...)`,
`swarm run --server-family`). `source` is the family's name (`unknown`: none of them). A field the
family does not expose is None, never 0. The names of several families in one scrape are read as the
first one `detect` names, and kept in `families` (the analysis withholds its causes then).

Label sets: with several `model_name`s the one asked for is kept (all of them when it is not
there; TensorRT-LLM's literal "undefined" is no model); the other label sets are summed
(data-parallel engines: vLLM's `engine`, SGLang's `dp_rank`; KV usage averaged), except the
rank labels a family names (SGLang's tp/pp/moe-ep ranks report one batch each: the lowest is read).

The text is untrusted: every figure passes server_checks.py's sanity checks (`checked`), and one that
fails is left out with the check it failed (`ServerSnapshot.rejected`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from swarm.analysis.server_checks import safe_total, value_fault
from swarm.analysis.server_metrics import Histogram, ServerSnapshot, checked
from swarm.core.server_families import NO_REASON, Family, detect, families_in
from swarm.core.server_families import family as family_of

AVERAGED_GAUGES = frozenset({"kv_usage"})  # a fraction per engine: averaged, not summed


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
    seen = families_in(samples) if family == "auto" else ()
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
            if keep is None or lab.get("model_name", keep) == keep
        ]
        return _lowest_rank(out, fam.rank_labels)

    snap = ServerSnapshot(
        ts=time.time() if ts is None else ts,
        source=source,
        model=keep or (models[0] if len(models) == 1 else None),
        families=seen if len(seen) > 1 else (),
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
    return checked(snap)


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
                total = safe_total(values)
                setattr(snap, fieldname, total / len(values) if fieldname in AVERAGED_GAUGES else total)
                break
    for fieldname, (num, den) in fam.ratios.items():
        top, bottom = safe_total(v for _, v in rows(num)), safe_total(v for _, v in rows(den))
        fault = value_fault(num, top) or value_fault(den, bottom)
        if fault:
            snap.rejected[fieldname] = fault
        elif rows(num) and bottom > 0:
            # a reserved share past the whole budget is a full one: TGI queues there, so its own
            # stays at or under 1, but the simulator's TGI face admits on blocks held and can reserve
            # past it (swarm/sim/tgi_metrics.py); either way the budget is spent, not a broken figure
            setattr(snap, fieldname, min(top / bottom, 1.0))
    cached = [v for _, v in rows(fam.cached)] if fam.cached else []
    if cached and snap.prompt_tokens is not None:
        snap.prefix_hits = safe_total(cached)
        snap.prompt_tokens += snap.prefix_hits
        snap.prefix_queries = snap.prompt_tokens


def _histogram(rows: Any, candidates: Sequence[str]) -> Histogram | None:
    """The first of `candidates` with buckets, its label sets summed bucket by bucket."""
    for name in candidates:
        buckets: dict[float, list[float]] = {}
        for lab, v in rows(name + "_bucket"):
            le = _bound(lab.get("le"))
            if le is not None:
                buckets.setdefault(le, []).append(v)
        if buckets:
            bounds = tuple(sorted(buckets))
            return Histogram(
                bounds,
                tuple(safe_total(buckets[b]) for b in bounds),
                safe_total(v for _, v in rows(name + "_sum")),
                safe_total(v for _, v in rows(name + "_count")),
            )
    return None


def _bound(le: str | None) -> float | None:
    """A bucket's `le` label as a number (None: missing, or no number; a NaN bound is no bucket)."""
    try:
        b = float(le) if le is not None else math.nan
    except ValueError:
        return None
    return None if math.isnan(b) else b
