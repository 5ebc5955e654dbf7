"""The report's HTML building blocks: its inline CSS (no stylesheet from the network), a cell's
text (`fmt`) and a table (`table_html`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from swarm.core.units import ms_number, percent_text

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left} tr.untrusted td{background:#fff0f0}
ul.findings li{margin:5px 0} .k{font-weight:600;font-family:monospace;font-size:12px;color:#555}
li.untrusted{color:#a00} .note{color:#8a5a00;font-size:13px} figure{margin:12px 0}
figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:12px;color:#555}
"""


def fmt(v: Any, kind: str = "") -> str:
    """A table cell: "ms" (seconds under an ms header; thousands separated from 10 s on), "pct"
    (a fraction), "int", else a float to one decimal or escaped text; "-" for None/NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if kind == "ms":
        return ms_number(v, thousands=v >= 10)
    if kind == "pct":
        return percent_text(v)
    if kind == "int":
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return html.escape(str(v))


def table_html(header: Sequence[str], rows: Sequence[Sequence[str]], row_class: Sequence[str] = ()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"
