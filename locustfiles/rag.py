"""The `rag` workload: locust -f locustfiles/rag.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class RagUser(LLMUser):
    workload = "rag"
