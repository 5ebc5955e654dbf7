"""The `short_qa` workload: locust -f locustfiles/short_qa.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class ShortQAUser(LLMUser):
    workload = "short_qa"
