"""The `mixed` workload: locust -f locustfiles/mixed.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class MixedUser(LLMUser):
    workload = "mixed"
