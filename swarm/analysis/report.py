"""`swarm report DIR`: DIR/report.html (self-contained) + the main plots as PNGs + DIR/stages.csv.

Rendered from the run's files only (loaded by swarm/analysis/rundir.py: summary.json, the request
records, server_metrics.jsonl, client_cpu.jsonl), so it can be re-rendered at any time. Every
piece may be missing: the report says what it lacks and shows the rest. The HTML inlines its
interactive charts (swarm/analysis/report_charts.py; the chart library, uPlot, from the package) and
embeds its PNGs (swarm/analysis/plots.py) as data URIs: no script, font or stylesheet from the network.
This module writes the files (`write_report`) and is the command; the page is assembled in
swarm/analysis/report_page.py from the sections of swarm/analysis/report_sections.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from swarm.analysis import plots
from swarm.analysis.endpoints import run_findings
from swarm.analysis.finding import Finding
from swarm.analysis.plots import render_plots
from swarm.analysis.report_page import render_html
from swarm.analysis.rundir import RunData, load_run
from swarm.core.runfiles import DIAGNOSIS, RECORDS_DIR, REPORT, REQUESTS, STAGES_CSV, SUMMARY
from swarm.core.units import stage_name

# ---------------------------------------------------------------------------------------- stage table


def stage_table(data: RunData) -> Any:
    """One row per stage: client numbers, server numbers, client CPU (the stages.csv columns)."""
    import pandas as pd

    cpu = data.cpu.by_stage()
    out = []
    for r in data.rows:
        s = data.server.get(r.stage)
        lat = s.latency if s else {}
        row: dict[str, Any] = {
            "stage": r.stage,
            "name": stage_name(r.stage),
            "users": r.users,
            "duration_s": r.duration_s,
            "requests": r.requests,
            "failures": r.failures,
            "cancelled": r.cancelled,
            "qps": r.qps,
            "output_tok_s": r.output_tok_s,
            "ttft_p50_s": r.ttft_p50,
            "ttft_p99_s": r.ttft_p99,
            "e2e_p50_s": r.e2e_p50,
            "e2e_p99_s": r.e2e_p99,
            "tpot_p50_s": r.tpot_p50,
            "itl_p99_s": r.itl_p99,
            "client_cpu_max_pct": cpu.get(r.stage),
        }
        if s is not None:
            row.update(
                {
                    "srv_running_mean": s.running_mean,
                    "srv_running_max": s.running_max,
                    "srv_waiting_mean": s.waiting_mean,
                    "srv_waiting_max": s.waiting_max,
                    "srv_kv_mean": s.kv_mean,
                    "srv_kv_max": s.kv_max,
                    "srv_preemptions": s.preemptions,
                    "srv_prefix_hit_rate": s.prefix_hit_rate,
                    "srv_prompt_tok_s": s.prompt_tok_s,
                    "srv_generation_tok_s": s.generation_tok_s,
                    "srv_requests": s.requests,
                    "srv_finish_reasons": json.dumps(s.finish_reasons) if s.finish_reasons else None,
                    "srv_spec_acceptance_rate": s.spec_acceptance_rate,
                    "srv_spec_mean_acceptance_length": s.spec_mean_acceptance_length,
                }
            )
            for key in ("ttft", "itl", "e2e", "queue"):
                for q in ("p50", "p99"):
                    row[f"srv_{key}_{q}_s"] = (lat.get(key) or {}).get(q)
        out.append(row)
    return pd.DataFrame(out)


def write_report(directory: Path, slo: str | None = None) -> Path:
    """Render DIR/report.html, the PNGs beside it and DIR/stages.csv. Returns the HTML path."""
    return write_run_report(load_run(Path(directory)), slo)[0]


def write_run_report(data: RunData, slo: str | None = None) -> tuple[Path, list[Finding]]:
    """The report of a run already loaded (report.html, its PNGs, stages.csv, diagnosis.json in its
    directory): (the HTML's path, the findings diagnosis.json holds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = run_findings(data, slo)
    stage_table(data).to_csv(data.directory / STAGES_CSV, index=False)
    pngs = {}
    for name, fig in render_plots(data, found).items():
        pngs[name] = plots.png(fig)
        (data.directory / name).write_bytes(pngs[name])
        plt.close(fig)
    (data.directory / DIAGNOSIS).write_text(
        json.dumps(
            [{"kind": f.kind, "stage": f.stage, "text": f.text, "trusted": f.trusted} for f in found],
            indent=2,
        )
        + "\n"
    )
    path = data.directory / REPORT
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(data, found, pngs), encoding="utf-8")
    tmp.replace(path)
    return path, found


# ---------------------------------------------------------------------------------------- CLI


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", help="a run's output directory (with summary.json and/or requests.parquet)")
    p.add_argument(
        "--slo",
        help="objectives for the highest-concurrency-meeting-SLO finding "
        "(default: the run's own --slo), e.g. ttft_p99<=800ms",
    )


def main(args: argparse.Namespace) -> int:
    from swarm.core.errors import UsageError

    directory = Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory")
    if not any((directory / n).exists() for n in (SUMMARY, REQUESTS, RECORDS_DIR)):
        raise UsageError(f"{directory} holds no run (no summary.json, requests.parquet or records/)")
    if args.slo is not None:  # --slo "" too: refused as empty, not ignored
        from swarm.stats import slo

        slo.parse(args.slo)
    path, found = write_run_report(load_run(directory), args.slo)  # the run read once
    for f in found:  # (as diagnosis.json holds them)
        print(("[not trusted] " if not f.trusted else "") + f.text)
    print(f"swarm report: {path}")
    return 0
