"""compare.html's interactive charts (swarm/analysis/interactive.py): one chart per compared figure,
run A and run B against the table's key (users, or the stage), hover values, zoom and toggles, x ticks
at the compared loads (thinned where close ones would collide). The comparison's numbers are
swarm/analysis/compare.py's; this module only draws the table it is given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from swarm.analysis.interactive import Chart, Series

SCALE = {"ms": 1000.0, "%": 100.0}  # a table's fraction or seconds to the unit its column shows


def compare_charts(
    table: Any, a_name: str, b_name: str, metrics: Sequence[tuple[str, str, str, bool]]
) -> list[Chart]:
    """A chart per metric (col, title, unit, higher-is-better) that either run has a value of."""
    key = table.columns[0]
    order = sorted(range(len(table)), key=lambda i: float(table[key].iloc[i]))
    x = [float(table[key].iloc[i]) for i in order]
    if len(set(x)) != len(x):
        return []  # (a key both runs repeat: no x axis to draw on)
    charts = []
    for col, title, unit, higher in metrics:
        sides = []
        for side, name, dash in (("a", f"A {a_name}", False), ("b", f"B {b_name}", True)):
            values = [table[f"{col}_{side}"].iloc[i] for i in order]
            sides.append(
                Series(
                    name,
                    [None if v is None or v != v else float(v) * SCALE.get(unit, 1.0) for v in values],
                    dash=dash,
                )
            )
        if all(v is None for s in sides for v in s.values):
            continue
        better = "higher is better" if higher else "lower is better"
        charts.append(
            Chart(f"chart-compare-{col}", f"{title} vs {key}.", x, sides, str(key), unit or title,
                  caption=f"({better})", x_at_data=True)
        )  # fmt: skip
    return charts
