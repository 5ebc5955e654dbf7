"""The `custom` workload: locust -f locustfiles/custom.py --host URL (--workload overrides it).
Needs --prompt-file FILE (JSONL or CSV: prompt or messages, optional max_tokens and thinking)."""

from swarm import LLMUser


class CustomUser(LLMUser):
    workload = "custom"
