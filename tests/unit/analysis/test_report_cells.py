"""The report's cells and tables: units by kind, "-" for what is missing, escaped text, row classes."""

from __future__ import annotations

import math

from swarm.analysis.report_cells import fmt, table_html


def test_a_cell_by_its_kind():
    assert fmt(None) == "-" and fmt(math.nan, "ms") == "-"
    assert fmt(0.0853, "ms") == "85" and fmt(12.5, "ms") == "12,500"  # thousands apart from 10 s on
    assert fmt(0.25, "pct") == "25%"
    assert fmt(12345, "int") == "12,345"
    assert fmt(3.14159) == "3.1"
    assert fmt("<b>") == "&lt;b&gt;"


def test_a_table_marks_the_rows_it_is_told_to():
    text = table_html(["a", "b<"], [["1", "2"], ["3", "4"]], ["", "untrusted"])
    assert "<th>b&lt;</th>" in text
    assert "<tr><td>1</td><td>2</td></tr>" in text
    assert '<tr class="untrusted"><td>3</td><td>4</td></tr>' in text
