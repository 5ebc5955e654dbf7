"""Statistics: quantiles, mergeable latency sketches, per-(workload, stage) aggregates and their
wire format, summary.json, SLOs, client CPU judgement. Pure; imports only `swarm.core`.
"""
