"""The run directory's files by name (`swarm run --out DIR`, `--swarm-out` of a plain `locust -f`):
the one place that spells them. docs/ARCHITECTURE.md ("Run directory") says who writes each.
"""

from __future__ import annotations

SUMMARY = "summary.json"  # the master's, at the end of the run (stats/summary.py's schema)
SUMMARY_PART = "summary.part.json"  # under `swarm run`: the master's, which swarm run completes into SUMMARY
RECORDS_DIR = "records"  # each worker's Parquet parts of the request records
REQUESTS = "requests.parquet"  # every record, the parts merged by `swarm run`
SERVER_METRICS = "server_metrics.jsonl"  # the target's /metrics, one scrape a line
GPU_METRICS = "gpu_metrics.jsonl"  # dcgm-exporters' scrapes (--gpu-metrics)
CLIENT_CPU = "client_cpu.jsonl"  # the workers' CPU per stage, as the master received it
ENDPOINTS_JSON = "endpoints.json"  # several endpoints: each one's label and scrapes file
RUN_MARKER = "run.json"  # `swarm run`'s mark that the folder is one of its run directories
MASTER_LOG = "master.log"
SIM_TRACE = "sim-trace.jsonl"  # the embedded simulator's per-request trace
DIAGNOSIS = "diagnosis.json"  # `swarm report`'s findings
STAGES_CSV = "stages.csv"  # `swarm report`'s stage table, client and server side by side
REPORT = "report.html"
REPEAT_JSON = "repeat.json"  # `swarm run --repeat N`: the statistics across the runs
TUNE_JSON = "tune.json"  # `swarm tune` / `swarm twin predict`: the configurations
TUNE_HTML = "tune.html"  # `swarm tune`'s page
PARETO_PNG = "pareto.png"  # `swarm tune`'s cost / capacity chart
LOCUST_HTML = "locust.html"  # Locust's own report of the run (--html)
# `swarm report`'s charts, beside report.html
QPS_PNG = "qps_vs_concurrency.png"
LATENCY_PNG = "latency_vs_concurrency.png"
THROUGHPUT_PNG = "throughput.png"
SERVER_TIMELINE_PNG = "server_timeline.png"
TTFT_PNG = "client_vs_server_ttft.png"
REQUESTS_TIMELINE_PNG = "requests_timeline.png"
SEARCH_PNG = "search.png"


def endpoint_metrics_name(index: int) -> str:
    """The scrapes' file of the endpoint at 0-based `index` in --host (a run with several)."""
    return f"server_metrics-{index + 1}.jsonl"


def repeat_dir_name(n: int) -> str:
    """The run directory of the n-th (from 1) run of `swarm run --repeat N`."""
    return f"repeat-{n}"
