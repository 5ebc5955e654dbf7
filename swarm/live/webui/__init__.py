"""The "LLM" tab in Locust's web UI: per-workload latency, throughput and failure rows, live.

Locust 2.4x's React UI renders extra tabs from template args (`extended_tabs`,
`extended_tables`: a column structure per tab key) and fills them from the `extended_stats`
list in the `/stats/requests` JSON it polls every couple of seconds; both sides' keys go
through the same snake_case -> camelCase conversion. So the tab needs no template or JS of its
own: a table structure and an `after_request` hook adding the rows.

Latency columns are cumulative over the run (what summary.json will say); QPS and output tok/s
are current rates over the last RATE_WINDOW_S seconds of reports. The "Client" column says
whether the load generator itself was the bottleneck: "client-bound: results not trustworthy"
with every stage where a worker process averaged more than 90% CPU (swarm/live/plugin.py), else the
busiest worker's CPU.

With --goodput the last three columns are the goodput (swarm/stats/goodput.py): good requests
counted so far, their share of the ok + failed non-warm-up requests, and good requests per second
over the last RATE_WINDOW_S seconds (rates key `good:<row key>`); "-" without --goodput.

Agent runs fill the TTFTC (first tool-call token) and TASK columns and "Tool calls" (tasks ended,
calls valid and invalid with their reasons); "-" elsewhere.

Conversations (chat_session) add one row per turn (1, 2, 3, 4+): requests,
not-ok requests, mean prompt tokens and TTFT by turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from swarm.core.records import TURN_BUCKETS
from swarm.core.units import stage_name
from swarm.stats.aggregate import Aggregate, Cell
from swarm.stats.quantiles import PERCENTILES

TAB_KEY = "llm"
TAB = {"title": "LLM", "key": TAB_KEY}
_MS_COLUMNS = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("ttfa", "p50"),
    ("ttfa", "p99"),
    ("tpot", "p50"),
    ("itl", "p99"),
    ("e2e", "p50"),
    ("e2e", "p99"),
    ("send_lag", "p50"),  # open loop and trace replay: how late requests left vs their schedule
    ("send_lag", "p99"),
    ("ttftc", "p50"),  # agent steps: time to the first tool-call token
    ("task", "p50"),  # agent tasks' duration
    ("task", "p90"),
)
STRUCTURE: list[dict[str, str]] = [
    {"key": "name", "title": "Workload"},
    {"key": "requests", "title": "# Requests"},
    {"key": "failed", "title": "# Failed"},
    {"key": "cancelled", "title": "# Cancelled"},
    {"key": "qps", "title": "QPS"},
    {"key": "output_tok_s", "title": "Output tok/s"},
    *({"key": f"{lat}_{stat}_ms", "title": f"{lat.upper()} {stat} (ms)"} for lat, stat in _MS_COLUMNS),
    {"key": "tool_calls", "title": "Tool calls (agent)"},
    {"key": "errors", "title": "Errors by outcome"},
    {"key": "client", "title": "Client"},
    {"key": "goodput_met", "title": "# Good (goodput)"},
    {"key": "goodput_share", "title": "Goodput %"},
    {"key": "goodput_s", "title": "Goodput req/s"},
]
CLIENT_BOUND = "client-bound: results not trustworthy"
TABLE = {"key": TAB_KEY, "structure": STRUCTURE}


def _ms(cell: Cell, latency: str, stat: str) -> float | str:
    v = cell.latencies[latency].quantile(PERCENTILES[stat])
    return "-" if v is None else round(v * 1000, 1)


def client_status(
    bound: Mapping[int, tuple[str, float]], busiest: float | None, multi_stage: bool = False
) -> str:
    """The "Client" column. `bound`: stage -> (worker, mean CPU %) where a worker exceeded 90%;
    `busiest`: the highest mean CPU % of any worker in any stage (None: no samples yet)."""
    if bound:
        where = "; ".join(
            f"{stage_name(stage) + ': ' if multi_stage else ''}{worker} {pct:.0f}% CPU"
            for stage, (worker, pct) in sorted(bound.items())
        )
        return f"{CLIENT_BOUND} ({where})"
    return "-" if busiest is None else f"ok (worker CPU <= {busiest:.0f}%)"


def row(
    name: str, cell: Cell, rates: tuple[float, float], client: str = "-", good_s: float | None = None
) -> dict[str, Any]:
    qps, tok_s = rates
    out: dict[str, Any] = {
        "name": name,
        "requests": cell.requests,
        "failed": cell.failed,
        "cancelled": cell.cancelled,
        "qps": round(qps, 2),
        "output_tok_s": round(tok_s, 1),
    }
    for lat, stat in _MS_COLUMNS:
        out[f"{lat}_{stat}_ms"] = _ms(cell, lat, stat)
    out["tool_calls"] = tool_calls_text(cell)
    out["errors"] = ", ".join(f"{k}={n}" for k, n in cell.failures.items() if n) or "-"
    out["client"] = client
    judged = cell.goodput_counted
    out["goodput_met"] = cell.goodput_met if judged else "-"
    out["goodput_share"] = round(100 * cell.goodput_met / judged, 1) if judged else "-"
    out["goodput_s"] = round(good_s, 2) if judged and good_s is not None else "-"
    return out


def tool_calls_text(cell: Cell) -> str:
    """Agent steps' tool calls: tasks, calls valid / invalid (with the reasons); "-" without steps."""
    steps, calls, valid, _, tasks = cell.tools
    if not steps:
        return "-"
    reasons = ", ".join(f"{k}={n}" for k, n in sorted(cell.tool_errors.items()))
    return f"{tasks} tasks, {valid} valid, {calls - valid} invalid" + (f" ({reasons})" if reasons else "")


def _good(rates: Mapping[str, tuple[float, float]], key: str) -> float | None:
    got = rates.get(f"good:{key}")
    return None if got is None else got[0]


def rows(agg: Aggregate, rates: Mapping[str, tuple[float, float]], client: str = "-") -> list[dict[str, Any]]:
    """One row per workload (and its classes), then `Total`, then one per served model when there are
    several, then one per endpoint when there are several (`--host URL1,URL2`). `rates`: workload,
    "workload/class", "total", "model:NAME" and "endpoint:LABEL" -> (qps, output tok/s);
    `client`: the "Client" column (`client_status`), the same on every row (the workers serve them all)."""
    out = []
    for name in agg.workloads():
        out.append(
            row(name, agg.combined(workload=name), rates.get(name, (0.0, 0.0)), client, _good(rates, name))
        )
        classes = agg.classes(name)
        if len(classes) > 1:  # each request class beside the workload's total (rates: the workload's only)
            out.extend(
                row(
                    f"{name} / {k}",
                    agg.combined(workload=name, klass=k),
                    rates.get(f"{name}/{k}", (0.0, 0.0)),
                    client,
                    _good(rates, f"{name}/{k}"),
                )
                for k in classes
            )
    out.append(row("Total", agg.combined(), rates.get("total", (0.0, 0.0)), client, _good(rates, "total")))
    # each served model (`--model a:3,b:1`) and each endpoint (`--host URL1,URL2`) beside the total
    for dim, values in (("model", agg.models()), ("endpoint", agg.endpoints())):
        if len(values) > 1:
            out.extend(
                row(
                    f"{dim} {v or '(none)'}",
                    agg.combined(**{dim: v}),
                    rates.get(f"{dim}:{v}", (0.0, 0.0)),
                    client,
                    _good(rates, f"{dim}:{v}"),
                )
                for v in values
            )
    out.extend(turn_rows(agg))
    return out


def turn_rows(agg: Aggregate) -> list[dict[str, Any]]:
    """Conversations (chat_session): one row per turn bucket (1, 2, 3, 4+) with its requests, failed
    and cancelled counts, mean prompt tokens (in the name) and TTFT; the columns a turn does not keep show "-"."""
    out = []
    for key in TURN_BUCKETS:
        c = agg.turns.cells.get(key)
        if c is None:
            continue
        prompt = f", prompt {c.prompt_tokens / c.ok:.0f} tok" if c.ok else ""
        r: dict[str, Any] = {col["key"]: "-" for col in STRUCTURE}
        r.update(
            name=f"turn {key}{prompt}",
            requests=c.requests,
            failed=c.requests - c.ok - c.cancelled,
            cancelled=c.cancelled,
        )
        for stat in ("p50", "p99"):
            v = c.ttft.quantile(PERCENTILES[stat])
            r[f"ttft_{stat}_ms"] = "-" if v is None else round(v * 1000, 1)
        out.append(r)
    return out


def install(web_ui: Any, get_rows: Callable[[], list[dict[str, Any]]]) -> None:
    """Add the LLM tab to a running Locust WebUI."""
    from flask import request

    args = web_ui.template_args
    args["extended_tabs"] = [*args.get("extended_tabs", []), TAB]
    args["extended_tables"] = [*args.get("extended_tables", []), TABLE]

    @web_ui.app.after_request
    def _add_llm_rows(response):
        if (
            not request.path.endswith("/stats/requests")
            or response.status_code != 200
            or not response.is_json
        ):
            return response
        body = response.get_json()
        body["extended_stats"] = [*body.get("extended_stats", []), {"key": TAB_KEY, "data": get_rows()}]
        response.set_data(json.dumps(body))
        return response


BUNDLE = (
    Path(__file__).resolve().parent / "bundle"
)  # built from webui/ (`make webui`), shipped in the package
SERIES_PATH = "/llm/series"


def install_charts(web_ui: Any, get_series: Callable[[], dict[str, Any]]) -> bool:
    """Serve the LLM tab's time series at /llm/series and load the page that charts them: Locust's
    own React UI rebuilt on its `locust-ui` library with the LLM tab's charts (swarm/live/webui/bundle,
    from webui/), set as the web UI's build path the way `--build-path` does. A `--build-path` the
    user gave wins (their page, no charts); templates the bundle lacks (auth.html, report.html) come
    from Locust's own build. False when the charts page is not installed."""
    from flask import jsonify
    from jinja2 import ChoiceLoader, FileSystemLoader
    from locust.html import DEFAULT_BUILD_PATH

    def series() -> Any:
        return jsonify(get_series())

    web_ui.app.add_url_rule(SERIES_PATH, "swarm_llm_series", web_ui.auth_required_if_enabled(series))
    app = web_ui.app
    if str(app.template_folder) != str(DEFAULT_BUILD_PATH) or not (BUNDLE / "index.html").exists():
        return False
    app.template_folder = str(BUNDLE)
    app.jinja_loader = ChoiceLoader([FileSystemLoader(str(BUNDLE)), FileSystemLoader(DEFAULT_BUILD_PATH)])
    return True
