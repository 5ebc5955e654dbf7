"""The `short_qa` workload: locust -f locustfiles/short_qa.py --host URL (--workload overrides it)."""

from swarm.user import LLMUser


class ShortQAUser(LLMUser):
    workload = "short_qa"
