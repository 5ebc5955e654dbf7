"""swarm/analysis/interactive.py: chart specs to one inline HTML fragment (uPlot, the data, the driver)
that names no host; the data rounded to what a hover shows."""

from __future__ import annotations

import json
import math
import re

from swarm.analysis import interactive
from swarm.analysis.interactive import Bar, Chart, Mark, Series, Timeline, Window, charts_html, rounded


def _data(page: str) -> dict:
    text = re.search(r"<script type='application/json' id='swarm-chart-data'>(.*?)</script>", page, re.S)
    assert text is not None
    return json.loads(text.group(1).replace("<\\/", "</"))


def test_rounded_keeps_significant_digits_and_drops_what_json_cannot_hold():
    assert rounded(1234.5678) == 1235.0 and rounded(0.00123456) == 0.001235 and rounded(-2.71828) == -2.718
    assert (
        rounded(0.0) == 0.0
        and rounded(None) is None
        and rounded(math.nan) is None
        and rounded(math.inf) is None
    )


def test_the_fragment_inlines_library_data_and_driver_and_names_no_host():
    chart = Chart(
        "chart-a", "A & B", [1.0, 2.0, 3.0], [Series("</script><b>x", [1.23456, None, 3.0])], "x", "y",
        marks=[Mark(2.0, "200")],
    )  # fmt: skip
    page = charts_html([chart])
    assert "http://" not in page and "https://" not in page  # uPlot's banner comment dropped
    assert page.count("<script") == 3 and not re.search(r"<script[^>]*\bsrc\b", page)
    assert "</script><b>" not in page  # a label cannot end the data's script
    assert "id='chart-a'" in page and "A &amp; B" in page
    assert "uPlot" in page and "window.swarmCharts" in page and ".uplot" in page  # library, driver, its CSS
    spec = _data(page)["charts"][0]
    assert (
        spec["kind"] == "xy"
        and spec["x"] == [1.0, 2.0, 3.0]
        and spec["marks"] == [{"x": 2.0, "label": "200"}]
    )
    assert spec["series"][0]["values"] == [1.235, None, 3.0] and spec["series"][0]["label"] == "</script><b>x"
    assert charts_html([]) == ""


def test_a_timeline_holds_its_windows_times_to_the_millisecond():
    bar = Bar("r1", "ok", 1.23456, 2.5, [1.23456, None, 1.9999, 2.5])
    page = charts_html([Timeline("chart-t", "T", ["queue", "prefill", "decode"], [Window("w", [bar])])])
    spec = _data(page)["charts"][0]
    assert spec["kind"] == "timeline" and spec["selected"] == 0
    assert spec["windows"][0]["bars"][0] == {
        "id": "r1", "outcome": "ok", "start": 1.235, "end": 2.5, "bounds": [1.235, None, 2.0, 2.5],
    }  # fmt: skip


def test_the_library_ships_in_the_package_with_its_licence():
    assert interactive.library().startswith("var uPlot=")
    vendor = interactive.resources.files("swarm.analysis").joinpath("vendor")
    assert "MIT License" in vendor.joinpath("uPlot.LICENSE").read_text()
    assert "1.6.32" in vendor.joinpath("README.md").read_text() and "1.6.32" in interactive.LICENCE_NOTE
