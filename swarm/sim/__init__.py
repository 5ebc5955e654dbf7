"""`swarm sim`: a simulated vLLM 0.33 OpenAI-compatible server.

engine.py (continuous batching, paged KV, prefix cache, preemption) -> server.py (aiohttp
endpoints) with render.py (SSE bytes), protocol.py (request checks), metrics.py (/metrics),
faults.py, trace.py (ground truth), profile.py (+ profiles/*.toml). Entry point: cli.py.
"""
