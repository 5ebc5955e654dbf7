"""vLLM's default histogram bucket bounds (seconds; tokens for iteration sizes), from its metrics code.

The one copy: the simulator's /metrics (swarm/sim/metrics.py) and the swarm's own histograms
(swarm/stats/sketch.py: every vLLM bound plus finer ones) both read these.
"""

from __future__ import annotations

# fmt: off
VLLM_TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL_BUCKETS: tuple[float, ...] = (  # inter-token latency and time per output token
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0)
VLLM_E2E_BUCKETS: tuple[float, ...] = (  # e2e, queue, prefill, decode and inference time
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
VLLM_ITERATION_TOKEN_BUCKETS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# fmt: on
