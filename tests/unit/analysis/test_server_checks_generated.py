"""Server metrics are untrusted input, checked by property (Hypothesis, seeds fixed: `derandomize`):
/metrics texts made of the families' real metric names (swarm/core/server_families.py) with any
value (NaN, +-Inf, negative, beyond 2^53, counters going back), several families' names at once,
duplicated series and garbage lines, a few scrapes a run (alone, or added to a vLLM whose scheduler
cap is a cause to find), go through the parser, the per-stage and
whole-run statistics, the diagnosis and the report's page; and server_metrics.jsonl lines of any
shape through `swarm report`'s loading. Nothing raises (but the parser's ValueError on a text that
is no exposition, which the poller says as one line), no figure that fails a check is read, and no
finding is read from one.

2,000 examples in all (1,400 texts, 600 JSONL runs), derandomized: the same examples every run.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarm.analysis.client_server import compare_ttft
from swarm.analysis.diagnosis import diagnose
from swarm.analysis.finding import Finding
from swarm.analysis.report import stage_table
from swarm.analysis.report_page import render_html
from swarm.analysis.rundir import RunData
from swarm.analysis.server_checks import histogram_fault, value_fault
from swarm.analysis.server_metrics import ServerSnapshot, StageServerStats, stage_stats, window_stats
from swarm.analysis.server_parse import parse_metrics
from swarm.analysis.server_trust import CAUSE_FIGURES, REQUEST_FIGURES, TOKEN_FIGURES, TTFT_FIGURES
from swarm.core.server_families import (
    COUNTER_FIELDS,
    FAMILIES,
    FAMILY_NAMES,
    GAUGE_FIELDS,
    TRTLLM_OLD,
    Family,
)
from swarm.stats.cpu import ClientLoad
from tests.unit.analysis import family_texts as ft
from tests.unit.analysis.helpers import rows

TEXT_EXAMPLES = 1400
JSONL_EXAMPLES = 600
T0, STAGE_S = 1000.0, 30.0
SWEEP = [(32, 8.0, 0.30), (64, 15.0, 0.35), (128, 15.2, 1.10)]  # QPS stops growing: a ceiling to explain
CAUSE_KINDS = {"max_num_seqs_cap", "kv_bound", "compute_bound", "outside_engine"}
TTFT_KINDS = {"frontend_bound", "network_delay"}


def _names(fam: Family) -> list[str]:
    """Every sample name the parser reads for `fam`."""
    out = [n for table in (fam.gauges, fam.counters) for names in table.values() for n in names]
    out += [
        n + suffix
        for names in fam.histograms.values()
        for n in names
        for suffix in ("_bucket", "_sum", "_count")
    ]
    out += [*fam.success, *(n for pair in fam.ratios.values() for n in pair)]
    return out + ([fam.cached] if fam.cached else [])


NAMES = sorted({n for fam in FAMILIES.values() for n in _names(fam)} | set(TRTLLM_OLD))
SPECIAL = [math.nan, math.inf, -math.inf, -1.0, -289.0, 0.0, 0.5, 1.5, 2.0**53, 2.0**60, 1e300, 5e-324]
VALUES = st.one_of(
    st.integers(0, 300).map(float),
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
)
LES = ["0.1", "1.0", "10", "+Inf", "-1", "NaN", "zz", "1e400"]
LABEL_SETS = [  # model_name, finished_reason, the ranks a family sums or reads the lowest of
    "",
    'model_name="m"',
    'model_name="other"',
    'model_name="undefined"',
    'finished_reason="stop",model_name="m"',
    'finished_reason="length",model_name="m"',
    'model_name="m",tp_rank="1"',
    'model_name="m",tp_rank="10"',
    'dp_rank="1",model_name="m"',
]
GARBAGE = [
    "garbage {{{",
    "# TYPE vllm:num_requests_running histogram",
    'vllm:num_requests_running{model_name="m"} 1 2 3',
    "vllm:num_requests_running{",
    "\x00",
    "# HELP",
    "x 0x10",
    'sglang:token_usage{le="1"} NaN',
]


def _number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def _line(parts: tuple[str, str, str, float]) -> str:
    name, labels, le, value = parts
    if name.endswith("_bucket"):
        labels = f'{labels},le="{le}"' if labels else f'le="{le}"'
    return f"{name}{{{labels}}} {_number(value)}" if labels else f"{name} {_number(value)}"


LINE = st.tuples(st.sampled_from(NAMES), st.sampled_from(LABEL_SETS), st.sampled_from(LES), VALUES).map(_line)


def _scrape(parts: tuple[list[str], int, int]) -> str:
    """The lines, one written twice (a duplicate, or a proxy's merge) and one garbage line (by the
    draw's two numbers)."""
    lines, twice, garbage = parts
    if lines and twice % 2:
        lines.append(lines[twice % len(lines)])
    if garbage < len(GARBAGE):
        lines.insert(garbage % (len(lines) + 1), GARBAGE[garbage])
    return "\n".join(lines) + "\n"


SCRAPE = st.tuples(st.lists(LINE, max_size=14), st.integers(0, 7), st.integers(0, 8 * len(GARBAGE))).map(
    _scrape
)


def _readable(snap: ServerSnapshot) -> None:
    """Every figure the snapshot holds passes the checks (a failed one is None, said in `rejected`)."""
    for name in (*GAUGE_FIELDS, *COUNTER_FIELDS):
        v = getattr(snap, name)
        assert v is None or value_fault(name, v) is None, (name, v)
    assert all(value_fault("requests", v) is None for v in snap.request_success.values())
    assert all(histogram_fault(h.bounds, h.counts, h.sum, h.count) is None for h in snap.histograms.values())


def _analysis(snaps: list[ServerSnapshot]) -> tuple[RunData, list[Finding]]:
    """The run's statistics, its findings and the report's page, as `swarm report` makes them."""
    table = rows(SWEEP, t0=T0, stage_s=STAGE_S)
    server = stage_stats(snaps, [(r.stage, r.start_s, r.end_s) for r in table])
    ordered = sorted(snaps, key=lambda s: s.ts)
    run = window_stats(ordered, -1, ordered[0].ts, ordered[-1].ts) if ordered else None
    data = RunData(RUN_DIR, {}, RECORDS, snaps, ClientLoad(), rows=table, server=server, run_server=run)
    data.ttft_pairs = compare_ttft(RECORDS, server, ordered)
    found = diagnose(
        table,
        server,
        source=data.source,
        run_server=run,
        client_total={"requests": 400, "output_tokens": 4000, "failures": {"timeout": 3}},
        ttft_pairs=data.ttft_pairs,
    )
    render_html(data, found, {})
    stage_table(data)
    return data, found


def _nothing_read_from_failed_figures(server: dict[int, StageServerStats], run, found: list[Finding]) -> None:
    failed = [set(s.failed) for s in server.values()]
    kinds = {f.kind for f in found}
    if kinds & CAUSE_KINDS:
        assert not any(f & CAUSE_FIGURES for f in failed), (kinds, failed)
    if kinds & TTFT_KINDS:
        assert not any(f & TTFT_FIGURES for f in failed), (kinds, failed)
    for f in found:
        if f.kind == "client_vs_server" and f.trusted and "equests" in f.text.split(":")[0]:
            assert not set(run.failed) & REQUEST_FIGURES, (f.text, run.failed)
        if f.kind == "client_vs_server" and f.trusted and "tokens" in f.text.split(":")[0]:
            assert not set(run.failed) & TOKEN_FIGURES, (f.text, run.failed)
        if f.kind != "server_check_failed" and f.trusted:  # no non-finite figure said as a number
            assert not re.search(r"\b(nan|inf)\b", f.text, re.IGNORECASE), f.text


def _capped(k: int) -> str:
    """Scrape k of three a stage of a vLLM whose scheduler holds 64 running (seed round 1)."""
    running, waiting, kv = {0: (32, 0, 0.20), 1: (64, 0.3, 0.30), 2: (64, 64, 0.35)}[k // 3]
    return ft.vllm(running, waiting, kv, success=10 * k, generation=100 * k, model="m")


def _records() -> pd.DataFrame:
    """Requests across the sweep: a first token every 0.1 s, TTFT 0.1-0.3 s."""
    n = int(len(SWEEP) * STAGE_S * 10)
    return pd.DataFrame(
        {
            "start_wall_s": [T0 + 0.1 * i for i in range(n)],
            "ttft_s": [0.1 + 0.2 * (i % 7) / 6 for i in range(n)],
        }
    )


RECORDS = _records()
RUN_DIR = Path("untrusted-metrics")  # the page is rendered from memory: nothing is read from it


@settings(
    max_examples=TEXT_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    scrapes=st.lists(SCRAPE, min_size=1, max_size=6),
    family=st.sampled_from(["auto", "auto", "auto", *FAMILY_NAMES]),
    model=st.sampled_from([None, "m"]),
    capped=st.booleans(),
)
def test_any_metrics_text_is_parsed_checked_and_diagnosed_without_a_finding_from_a_failed_check(
    scrapes, family, model, capped
):
    if capped:  # a vLLM capped at 64 (a cause to find), the drawn lines added to the first scrapes
        scrapes = [_capped(k) + (scrapes[k] if k < len(scrapes) else "") for k in range(3 * len(SWEEP))]
    snaps = []
    step = len(SWEEP) * STAGE_S / len(scrapes)
    for i, text in enumerate(scrapes):
        try:
            snap = parse_metrics(text, ts=T0 + i * step, model=model, family=family)
        except ValueError:
            continue  # no exposition: the poller says so in one line
        _readable(snap)
        again = ServerSnapshot.from_json(json.loads(json.dumps(snap.to_json())))
        assert again == snap  # the JSONL keeps the checked snapshot as it is
        snaps.append(snap)
    data, found = _analysis(snaps)
    _nothing_read_from_failed_figures(data.server, data.run_server, found)


JSON_VALUE = st.one_of(st.none(), VALUES, st.sampled_from(["1", "x", [], {}]))
BOUNDS = st.lists(st.sampled_from(["0.1", "1.0", "+Inf", "NaN", "-Inf", 0.5, 1e300]), max_size=4)
JSON_HIST = st.tuples(BOUNDS, st.lists(VALUES, max_size=4), VALUES, VALUES).map(
    lambda h: {"le": h[0], "counts": h[1], "sum": h[2], "count": h[3]}
)
SNAP_KEYS = [*GAUGE_FIELDS, *COUNTER_FIELDS, "source", "families", "request_success", "histograms"]
KEY_VALUE = {
    "source": st.sampled_from([*FAMILY_NAMES, "unknown", "other"]),
    "families": st.lists(st.sampled_from(FAMILY_NAMES), max_size=2),
    "request_success": st.dictionaries(st.sampled_from(["stop", "length"]), VALUES, max_size=2),
    "histograms": st.dictionaries(st.sampled_from(["ttft", "e2e", "itl"]), JSON_HIST, max_size=2),
}


@st.composite
def _json_snap(draw: st.DrawFn) -> dict:
    """One server_metrics.jsonl line: a scrape time and a few of the snapshot's keys, any value."""
    line = {"ts": T0 + draw(st.integers(0, 89))}
    for key in draw(st.lists(st.sampled_from(SNAP_KEYS), max_size=6, unique=True)):
        line[key] = draw(KEY_VALUE.get(key, JSON_VALUE))
    return line


@settings(
    max_examples=JSONL_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(lines=st.lists(_json_snap(), min_size=1, max_size=8))
def test_any_server_metrics_jsonl_is_loaded_checked_and_reported(lines):
    snaps = []
    for line in lines:
        try:  # as read_snapshots reads each line (a line it cannot read is passed over)
            snap = ServerSnapshot.from_json(json.loads(json.dumps(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        _readable(snap)
        snaps.append(snap)
    data, found = _analysis(snaps)
    _nothing_read_from_failed_figures(data.server, data.run_server, found)
