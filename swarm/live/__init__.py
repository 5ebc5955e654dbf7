"""Inside a Locust process: the options registered with Locust, the typed state on the
environment, `LLMUser`, the load shape, the worker and master sides of the statistics plugin,
/metrics, the record writer and the web UI's LLM tab. Never imports `analysis` or `orchestrate`.
"""
