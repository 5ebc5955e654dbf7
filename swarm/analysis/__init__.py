"""After (or beside) a run: the run directory loader, the target's /metrics, diagnosis, plots,
report.html, run comparison and the results table. Never imports `live`.
"""
