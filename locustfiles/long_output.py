"""The `long_output` workload: locust -f locustfiles/long_output.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class LongOutputUser(LLMUser):
    workload = "long_output"
