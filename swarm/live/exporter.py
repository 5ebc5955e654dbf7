"""Prometheus text for the master's merged aggregate (a prometheus_client custom Collector).

Series, all labelled `model_name` (the run's `--model` as given, else the discovered model: one
name, or the split `a:3,b:1`; unchanged from before splits) and `run_id`; the per-request ones also
`workload`, `class` (the request class: direct / thinking, or a dataset's) and `model` (the served
model each request named, one series per model of a split; `unknown` when it named none) and
`endpoint` (the endpoint it went to, without credentials: one series per endpoint of `--host
URL1,URL2`): `sum by (workload)` is the workload's total, `sum by (model)` a model's, `sum by
(endpoint)` an endpoint's:
- histograms `swarm_{ttft,ttfa,itl,tpot,e2e,send_lag,ttftc,task}_seconds`: exact counts on swarm.stats.aggregate.BUCKETS,
  which contain every vLLM TTFT/ITL/E2E bucket boundary, so
  `histogram_quantile(0.99, sum by (le) (rate(swarm_ttft_seconds_bucket[1m])))` and the same on
  `vllm:time_to_first_token_seconds_bucket` compare bucket by bucket in one panel;
- counters `swarm_requests_total{outcome}` (every outcome, zeros included),
  `swarm_prompt_tokens_total`, `swarm_output_tokens_total`, `swarm_reasoning_tokens_total`;
- gauges `swarm_users`, `swarm_workers`, `swarm_stage`, `swarm_degraded_workers`;
- with `--goodput`, counters `swarm_goodput_requests_total` (requests meeting every per-request
  SLO) and `swarm_goodput_judged_requests_total` (the non-warm-up ok + failed requests they are a
  share of), same labels as the request counters: goodput is
  `sum(rate(swarm_goodput_requests_total[1m]))`, its share the first over the second.
- the info gauge `swarm_run_info{version, target_family, target_version, model, workload, run_id}`
  = 1: the run's provenance (swarm/stats/provenance.py `run_info_labels`);
- conversations (chat_session) only, labelled `turn` (1, 2, 3, 4+): `swarm_turn_ttft_seconds`,
  `swarm_turn_requests_total`, `swarm_turn_prompt_tokens_total`; and `swarm_sessions_cut_total`.

Counters are the integer sums of what the workers sent, so they equal that sum exactly. Latency
statistics cover successful, non-warm-up requests (see swarm/stats/aggregate.py). Nothing from a request
(prompt, answer, error text, headers) and no option value other than the run id, the model name and
(in the run info) the workload is exposed; the run info's target version and model are what the
server states, cut to one printable line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from swarm.core.records import OUTCOMES
from swarm.stats.aggregate import LATENCIES, Aggregate, Cell

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_HELP = {
    "ttft": "Client-side time to first token (reasoning or answer), successful requests",
    "ttfa": "Client-side time to first answer (content) token, successful requests",
    "itl": "Client-side gap between token-carrying chunks, successful requests",
    "tpot": "Client-side time per output token after the first, (e2e-ttft)/(output_tokens-1)",
    "e2e": "Client-side end-to-end request latency until [DONE], successful requests",
    "send_lag": "Open loop: how late each request left relative to its arrival schedule, all requests sent",
    "ttftc": "Agent steps: client-side time to the first tool-call token, successful steps that called",
    "task": "Agent tasks: duration from the first send to the last step's end (steps' E2E + tool times)",
}


@dataclass
class ExportState:
    """What the master exposes; built fresh on each scrape."""

    aggregate: Aggregate
    run_id: str
    model_name: str = "unknown"
    users: int = 0
    workers: int = 0
    stage: int = 0
    degraded_workers: int = 0
    replay_late_rows: int | None = None  # trace replay: rows sent over --trace-max-lag late (None: no replay)
    extra_labels: dict[str, str] = field(default_factory=dict)
    run_info: dict[str, str] = field(default_factory=dict)  # swarm_run_info's labels (stats/provenance.py)


class SwarmCollector(Collector):
    def __init__(self, state: Callable[[], ExportState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        st = self._state()
        run = [st.model_name or "unknown", st.run_id]
        cells = _cells(st.aggregate)
        yield from latency_metrics(cells, run)
        yield from request_metrics(cells, run)
        yield from goodput_metrics(cells, run)
        yield from turn_metrics(st.aggregate, run)
        yield from gauge_metrics(st, run)
        yield from run_info_metric(st)


Cells = dict[tuple[str, str, str, str], Cell]  # (workload, class, served model, endpoint) -> its cell
WL_LABELS = ["workload", "class", "model", "endpoint", "model_name", "run_id"]


def _cells(agg: Aggregate) -> Cells:
    """Every (workload, request class, served model, endpoint) that sent a request, with its cell
    (its stages merged): one pass over the aggregate's cells."""
    out: Cells = {}
    for (w, _, k, m, e), c in agg.cells.items():
        key = (w, k, m or "unknown", e or "unknown")
        mine = out.get(key)
        if mine is None:
            mine = out[key] = Cell(w, -1, k, m or "all", e or "all")
        mine.merge(c, bins=False)
    return {key: out[key] for key in sorted(out) if out[key].requests}


def latency_metrics(cells: Cells, run: list[str]) -> Iterator[Metric]:
    """A histogram per latency, on the exact bucket counts."""
    for name in LATENCIES:
        h = HistogramMetricFamily(f"swarm_{name}_seconds", _HELP[name], labels=WL_LABELS)
        for workload, cell in cells.items():
            s = cell.latencies[name]
            buckets = [(floatToGoString(bound), count) for bound, count in s.cumulative_buckets()]
            h.add_metric([*workload, *run], buckets, sum_value=s.sum)
        yield h


def request_metrics(cells: Cells, run: list[str]) -> Iterator[Metric]:
    """Requests by outcome (zeros included), and the token counters."""
    req = CounterMetricFamily(
        "swarm_requests",
        "Requests sent, each counted once when it ends, by outcome (failed, cancelled and warm-up included)",
        labels=[*WL_LABELS, "outcome"],
    )
    for workload, cell in cells.items():
        for o in OUTCOMES:
            req.add_metric([*workload, *run, o.value], cell.outcomes[o.value])
    yield req
    for attr, text in (
        ("prompt_tokens", "Prompt tokens of finished requests (server usage)"),
        ("output_tokens", "Output tokens (reasoning + answer) of finished requests"),
        ("reasoning_tokens", "Reasoning tokens of finished requests"),
    ):
        c = CounterMetricFamily(f"swarm_{attr}", text, labels=WL_LABELS)
        for workload, cell in cells.items():
            c.add_metric([*workload, *run], getattr(cell, attr))
        yield c


def goodput_metrics(cells: Cells, run: list[str]) -> Iterator[Metric]:
    """The --goodput counters (no samples without --goodput: nothing was judged)."""
    judged = any(cell.goodput_counted for cell in cells.values())
    for name, text, attr in (
        (
            "swarm_goodput_requests",
            "Requests meeting every --goodput SLO (ok, non-warm-up)",
            "goodput_met",
        ),
        (
            "swarm_goodput_judged_requests",
            "Requests judged against --goodput: non-warm-up, ok or failed (not cancelled)",
            "goodput_counted",
        ),
    ):
        c = CounterMetricFamily(name, text, labels=WL_LABELS)
        for workload, cell in cells.items() if judged else ():
            c.add_metric([*workload, *run], getattr(cell, attr))
        yield c


def gauge_metrics(st: ExportState, run: list[str]) -> Iterator[Metric]:
    """Users, workers, stage, degraded workers (and the replay's late rows while a trace replays)."""
    gauges: list[tuple[str, str, float]] = [
        ("swarm_users", "Concurrent simulated users", st.users),
        ("swarm_workers", "Connected Locust workers", st.workers),
        ("swarm_stage", "Index of the current load stage", st.stage),
        (
            "swarm_degraded_workers",
            "Workers lost during the run (missing heartbeat)",
            st.degraded_workers,
        ),
    ]
    if st.replay_late_rows is not None:  # only while a trace is replayed
        gauges.append(
            (
                "swarm_trace_replay_late_rows",
                "Trace replay: rows sent more than --trace-max-lag after their time",
                st.replay_late_rows,
            )
        )
    for metric, text, value in gauges:
        g = GaugeMetricFamily(metric, text, labels=["model_name", "run_id"])
        g.add_metric(run, value)
        yield g


def run_info_metric(st: ExportState) -> Iterator[Metric]:
    """`swarm_run_info` = 1, labelled with what the run is: the swarm's version, the target's family,
    version and model as the server states them ("unknown" until read at the test's start, or when
    it does not say), the workload option, the run id. Grafana shows it as the run's caption."""
    if not st.run_info:
        return
    names = sorted(st.run_info)
    g = GaugeMetricFamily("swarm_run_info", "The run's provenance (always 1)", labels=[*names, "run_id"])
    g.add_metric([st.run_info[n] for n in names] + [st.run_id], 1)
    yield g


def turn_metrics(agg: Aggregate, run: list[str]) -> Iterator[Metric]:
    """Conversations (chat_session), labelled `turn` ("1", "2", "3", "4+": bounded): TTFT histogram,
    requests and prompt tokens per turn, and the conversations cut at max_model_len. Nothing
    without conversations."""
    turns = agg.turns
    if not turns:
        return
    labels = ["turn", "model_name", "run_id"]
    h = HistogramMetricFamily(
        "swarm_turn_ttft_seconds", "Client-side TTFT by conversation turn", labels=labels
    )
    req = CounterMetricFamily("swarm_turn_requests", "Conversation turns sent, by turn", labels=labels)
    prompt = CounterMetricFamily(
        "swarm_turn_prompt_tokens", "Prompt tokens of successful conversation turns, by turn", labels=labels
    )
    for key, c in turns.cells.items():
        buckets = [(floatToGoString(bound), count) for bound, count in c.ttft.cumulative_buckets()]
        h.add_metric([key, *run], buckets, sum_value=c.ttft.sum)
        req.add_metric([key, *run], c.requests)
        prompt.add_metric([key, *run], c.prompt_tokens)
    cut = CounterMetricFamily(
        "swarm_sessions_cut",
        "Conversations ended early because the next turn would pass max_model_len",
        labels=["model_name", "run_id"],
    )
    cut.add_metric(run, turns.cut)
    yield from (h, req, prompt, cut)


def registry_for(state: Callable[[], ExportState]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwarmCollector(state))
    return registry


def render(state: ExportState | Callable[[], ExportState]) -> bytes:
    """Prometheus text exposition of `state` (a snapshot or a callable returning one)."""
    fn = state if callable(state) else (lambda: state)
    return generate_latest(registry_for(fn))
