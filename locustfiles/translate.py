"""The `translate` workload: locust -f locustfiles/translate.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class TranslateUser(LLMUser):
    workload = "translate"
