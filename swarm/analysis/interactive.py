"""Interactive charts for the pages (report.html, tune.html, compare.html): `Chart` and `Timeline`
specs -> one HTML fragment (`charts_html`) with the chart library, its stylesheet, the page's own
driver (swarm/analysis/charts.js) and the data (JSON) inlined. No URL anywhere: the page draws offline.

The library is uPlot (swarm/analysis/vendor: MIT, version and source in its README): hover values in
each chart's legend, drag to zoom (double-click resets), a click on a legend entry hides or shows
its series. Charts with the same `sync` key share the cursor and the zoom (the client's and the
server's timelines on one time axis). `Mark`s are vertical lines (stage starts), their labels
thinned where they would overlap. A `Timeline` draws one bar per request (its phases: queue,
prefill, decode), one window of requests at a time, picked in a select.

The page sets `window.swarmCharts` once drawn: each chart's id, series and the points it holds,
read back from the charts themselves (tests/e2e/test_report_chromium.py compares them with the run).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import orjson

VENDOR = "vendor"
LIBRARY = "uPlot.iife.min.js"
LIBRARY_CSS = "uPlot.min.css"
DRIVER = "charts.js"
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
DIGITS = 4  # significant digits kept in the page's data (a point's hover value; the file's size)


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float | None]
    color: str = ""  # "" -> the palette's next
    dash: bool = False
    points: bool = False  # points only (a scatter), no line
    axis: str = "y"  # "y" (left) or "y2" (right, `Chart.y2_label`)


@dataclass(frozen=True)
class Mark:
    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    x: Sequence[float]  # ascending; every series has one value (or None) per x
    series: Sequence[Series]
    x_label: str
    y_label: str
    y2_label: str = ""
    marks: Sequence[Mark] = ()
    sync: str = ""  # charts sharing a key share cursor and zoom
    caption: str = ""
    band: tuple[int, int] | None = None  # two series' indices: the area between them is shaded
    x_at_data: bool = False  # x ticks at the data's own x (the stages' loads), thinned where they'd collide
    y_min: float | None = None
    y_max: float | None = None
    kind: str = field(default="xy", init=False)


@dataclass(frozen=True)
class Bar:
    """One request: its whole extent as the client saw it (send -> end) and its phases' bounds
    (len(phases) + 1 times, None where unknown)."""

    id: str
    outcome: str
    start: float
    end: float
    bounds: Sequence[float | None]


@dataclass(frozen=True)
class Window:
    label: str
    bars: Sequence[Bar]


@dataclass(frozen=True)
class Timeline:
    id: str
    title: str
    phases: Sequence[str]
    windows: Sequence[Window]
    selected: int = 0  # the window shown first
    caption: str = ""
    sync: str = ""
    marks: Sequence[Mark] = ()
    kind: str = field(default="timeline", init=False)


def rounded(v: float | None, digits: int = DIGITS) -> float | None:
    """`v` to `digits` significant digits (None and NaN -> None): what the page's JSON holds."""
    if v is None or not math.isfinite(v):
        return None
    if v == 0:
        return 0.0
    return round(v, digits - 1 - math.floor(math.log10(abs(v))))


def on_time(v: float | None) -> float | None:
    """A time axis value (seconds since the run's start) to the millisecond."""
    return None if v is None or not math.isfinite(v) else round(v, 3)


def _spec(chart: Chart | Timeline) -> dict[str, Any]:
    spec = asdict(chart)
    if isinstance(chart, Chart):
        spec["x"] = [rounded(x, 10) for x in chart.x]
        for s in spec["series"]:
            s["values"] = [rounded(v) for v in s["values"]]
    else:
        for w in spec["windows"]:
            for b in w["bars"]:
                b["start"], b["end"] = on_time(b["start"]), on_time(b["end"])
                b["bounds"] = [on_time(t) for t in b["bounds"]]
    return spec


def _asset(name: str) -> str:
    return resources.files("swarm.analysis").joinpath(name).read_text(encoding="utf-8")


def library() -> str:
    """uPlot's script without its banner comment (which names its repository's URL)."""
    text = _asset(f"{VENDOR}/{LIBRARY}")
    if text.startswith("/*!"):
        text = text[text.index("*/") + 2 :].lstrip()
    return text


def _script_safe(text: str) -> str:
    return text.replace("</", "<\\/")  # JSON in a <script>: no "</script>" inside it


def charts_html(charts: Sequence[Chart | Timeline]) -> str:
    """The charts' <div>s, then one <style> and three <script>s (library, data, driver)."""
    if not charts:
        return ""
    divs = "\n".join(
        f"<figure class='chart' id='{html.escape(c.id)}'><figcaption><b>{html.escape(c.title)}</b>"
        + (f" {html.escape(c.caption)}" if c.caption else "")
        + "</figcaption></figure>"
        for c in charts
    )
    data = orjson.dumps({"charts": [_spec(c) for c in charts]}).decode()
    return (
        f"{divs}\n<style>{_asset(f'{VENDOR}/{LIBRARY_CSS}')}\n{CHART_CSS}</style>\n"
        f"<script>{_script_safe(library())}</script>\n"
        f"<script type='application/json' id='swarm-chart-data'>{_script_safe(data)}</script>\n"
        f"<script>{_script_safe(_asset(DRIVER))}</script>\n"
    )


LICENCE_NOTE = (
    "Charts drawn with uPlot 1.6.32 (MIT licence, Copyright (c) 2022 Leon Sorokin), inlined in this "
    "file: it works offline. Hover for values, drag to zoom (double-click resets), click a legend "
    "entry to hide or show its series."
)

CHART_CSS = """
figure.chart { margin: 1.2em 0; }
figure.chart figcaption { font-size: 13px; color: #444; margin-bottom: .3em; }
.uplot .u-legend { font-size: 12px; text-align: left; }
.timeline-info { font-size: 12px; color: #333; min-height: 1.4em; font-family: monospace; }
.timeline-pick { font-size: 13px; margin: .3em 0; }
"""
