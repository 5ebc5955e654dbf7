"""The core every layer may import: records, events, errors, tokens, units, option and bucket tables.

Nothing here imports another swarm subpackage. `records` (RequestRecord, Outcome), `events`
(the `llm_request` hook), `errors` (the SwarmError tree, exit codes), `tokens` (the pseudo-
tokenizer), `units` (durations, time spans, run ids), `buckets` (vLLM's histogram bounds),
`options` (the one table of the swarm's options), `recordfile` (the records' Parquet format).
"""
